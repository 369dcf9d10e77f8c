#include "master/index/object_table.h"

namespace nanokv::master {

namespace {

constexpr size_t kMinSlots = 16;

}  // namespace

ObjectTable::ObjectTable() : slots_(kMinSlots), blocks_(1) {}

size_t ObjectTable::Probe(std::string_view key, uint64_t hash) const {
  const uint64_t stored = Stored(hash);
  const size_t mask = slots_.size() - 1;
  for (size_t i = Home(stored);; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.hash == 0) return i;
    if (slot.hash == stored && keys_.Get(slot.key) == key) return i;
  }
}

void ObjectTable::Grow() {
  std::vector<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.hash == 0) continue;
    size_t i = Home(slot.hash);
    while (slots_[i].hash != 0) i = (i + 1) & mask;
    slots_[i] = slot;
  }
}

void ObjectTable::ShrinkIfSparse() {
  // Grown at 80% full, rebuilt under 12.5% to at most 40%: between two
  // rebuilds most keys come or go, so each costs O(1) per key moved. The
  // arena likewise: rebuilt under a quarter live, it comes back near whole.
  const bool sparse_slots = slots_.size() > kMinSlots && size_ * 8 < slots_.size();
  const bool sparse_keys = keys_.bytes() > 2 * KeyArena::kChunkBytes && keys_.live_bytes() * 4 < keys_.bytes();
  if (!sparse_slots && !sparse_keys) return;
  size_t capacity = kMinSlots;
  while (size_ * 5 > capacity * 2) capacity *= 2;
  size_t extras = 0;
  for (const Slot& slot : slots_) extras += slot.hash != 0 && slot.extra != 0 ? 1 : 0;
  std::vector<Slot> slots(capacity);
  KeyArena keys;
  std::vector<Block> blocks;
  blocks.reserve(1 + extras);
  blocks.emplace_back();  // [0] unused
  const size_t mask = capacity - 1;
  for (const Slot& slot : slots_) {
    if (slot.hash == 0) continue;
    Slot moved = slot;
    moved.key = keys.Add(keys_.Get(slot.key));
    if (slot.extra != 0) {
      moved.extra = static_cast<uint32_t>(blocks.size());
      blocks.push_back(blocks_[slot.extra]);
    }
    size_t i = moved.hash & mask;
    while (slots[i].hash != 0) i = (i + 1) & mask;
    slots[i] = moved;
  }
  slots_.swap(slots);
  keys_ = std::move(keys);
  blocks_.swap(blocks);
  std::vector<uint32_t>().swap(free_blocks_);
}

bool ObjectTable::AddCopy(std::string_view key, uint64_t hash, uint64_t bytes_total, CopyRef copy) {
  if ((size_ + 1) * 5 > slots_.size() * 4) Grow();
  size_t at = Probe(key, hash);
  Slot& slot = slots_[at];
  if (slot.hash == 0) {
    slot.hash = Stored(hash);
    slot.key = keys_.Add(key);
    slot.bytes_total = bytes_total;
    slot.extra = 0;
    slot.copies = 1;
    slot.first = copy;
    ++size_;
    return true;
  }
  for (size_t i = 0; i < slot.copies; ++i) {
    CopyRef& have = CopyAt(slot, i);
    if (have.node == copy.node) {
      have = copy;
      return false;
    }
  }
  if (slot.copies == kMaxCopies) return false;
  if (slot.extra == 0) {
    if (!free_blocks_.empty()) {
      slot.extra = free_blocks_.back();
      free_blocks_.pop_back();
    } else {
      slot.extra = static_cast<uint32_t>(blocks_.size());
      blocks_.emplace_back();
    }
  }
  CopyAt(slot, slot.copies) = copy;
  ++slot.copies;
  return true;
}

void ObjectTable::Release(Slot& slot) {
  keys_.Free(slot.key);
  if (slot.extra != 0) free_blocks_.push_back(slot.extra);
}

void ObjectTable::RemoveCopyAt(size_t at, size_t i) {
  Slot& slot = slots_[at];
  CopyAt(slot, i) = CopyAt(slot, slot.copies - 1u);
  --slot.copies;
  if (slot.copies == 1 && slot.extra != 0) {
    free_blocks_.push_back(slot.extra);
    slot.extra = 0;
  }
  if (slot.copies == 0) {
    Release(slot);
    EraseAt(at);
    --size_;
  }
}

bool ObjectTable::RemoveCopy(std::string_view key, uint64_t hash, uint16_t node, uint32_t epoch,
                             CopyRef* removed) {
  size_t at = Probe(key, hash);
  Slot& slot = slots_[at];
  if (slot.hash == 0) return false;
  for (size_t i = 0; i < slot.copies; ++i) {
    const CopyRef& have = CopyAt(slot, i);
    if (have.node != node || (epoch != 0 && have.epoch != epoch)) continue;
    if (removed != nullptr) *removed = have;
    RemoveCopyAt(at, i);
    ShrinkIfSparse();
    return true;
  }
  return false;
}

void ObjectTable::EraseAt(size_t i) {
  const size_t mask = slots_.size() - 1;
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (slots_[j].hash == 0) break;
    const size_t home = Home(slots_[j].hash);
    // Slot j stays if its home lies cyclically in (i, j]; else it moves up to i.
    const bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!stays) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = Slot{};
}

bool ObjectTable::Find(std::string_view key, uint64_t hash, uint64_t* bytes_total,
                       std::vector<CopyRef>* copies) const {
  const Slot& slot = slots_[Probe(key, hash)];
  if (slot.hash == 0) return false;
  if (bytes_total != nullptr) *bytes_total = slot.bytes_total;
  if (copies != nullptr) {
    copies->clear();
    for (size_t i = 0; i < slot.copies; ++i) copies->push_back(CopyAt(slot, i));
  }
  return true;
}

bool ObjectTable::Contains(std::string_view key, uint64_t hash) const {
  return slots_[Probe(key, hash)].hash != 0;
}

size_t ObjectTable::RemoveNode(uint16_t node, const std::function<void(const CopyRef&)>& removed) {
  size_t count = 0;
  for (size_t at = 0; at < slots_.size();) {
    Slot& slot = slots_[at];
    bool erased = false;
    for (size_t i = 0; slot.hash != 0 && i < slot.copies; ++i) {
      if (CopyAt(slot, i).node != node) continue;
      removed(CopyAt(slot, i));
      ++count;
      erased = slot.copies == 1;
      RemoveCopyAt(at, i);
      break;  // a node holds a key once
    }
    // After an erase a later key may have moved into this slot: look again.
    if (!erased) ++at;
  }
  ShrinkIfSparse();
  return count;
}

void ObjectTable::ListFrom(size_t* cursor, size_t max,
                           const std::function<void(std::string_view, uint64_t,
                                                    const std::vector<CopyRef>&)>& row) const {
  std::vector<CopyRef> copies;
  size_t listed = 0;
  size_t at = *cursor;
  for (; at < slots_.size() && listed < max; ++at) {
    const Slot& slot = slots_[at];
    if (slot.hash == 0) continue;
    copies.clear();
    for (size_t i = 0; i < slot.copies; ++i) copies.push_back(CopyAt(slot, i));
    row(keys_.Get(slot.key), slot.bytes_total, copies);
    ++listed;
  }
  *cursor = at;
}

size_t ObjectTable::MemoryBytes() const {
  return slots_.capacity() * sizeof(Slot) + blocks_.capacity() * sizeof(Block) +
         free_blocks_.capacity() * sizeof(uint32_t) + keys_.bytes();
}

bool ObjectTable::CheckInvariants() const {
  size_t live = 0;
  const size_t mask = slots_.size() - 1;
  for (size_t at = 0; at < slots_.size(); ++at) {
    const Slot& slot = slots_[at];
    if (slot.hash == 0) continue;
    ++live;
    if (slot.copies == 0 || slot.copies > kMaxCopies) return false;
    if ((slot.copies > 1) != (slot.extra != 0)) return false;
    // Every slot between its home and itself is taken (the probe reaches it),
    // and the probe finds this very slot.
    for (size_t i = Home(slot.hash); i != at; i = (i + 1) & mask) {
      if (slots_[i].hash == 0) return false;
    }
    if (Probe(keys_.Get(slot.key), slot.hash) != at) return false;
    for (size_t i = 0; i < slot.copies; ++i) {
      for (size_t j = i + 1; j < slot.copies; ++j) {
        if (CopyAt(slot, i).node == CopyAt(slot, j).node) return false;
      }
    }
  }
  return live == size_;
}

}  // namespace nanokv::master
