"""Engine integrations over nanokv; each imports its engine only when used."""
