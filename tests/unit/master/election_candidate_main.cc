// One master's election as a process (tests/util/election_candidate.h), for
// the tests that SIGKILL a leader.
#include "tests/util/election_candidate.h"

int main(int argc, char** argv) { return nanokv::testing::RunElectionCandidate(argc, argv); }
