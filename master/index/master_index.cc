#include "master/index/master_index.h"

#include <xxhash.h>

#include <algorithm>

namespace nanokv::master {
namespace {

std::string Quote(std::string_view key) { return "'" + std::string(key) + "'"; }

}  // namespace

uint64_t KeyHash(std::string_view key) { return XXH64(key.data(), key.size(), 0); }

MasterIndex::MasterIndex()
    : counts_(new std::atomic<uint64_t>[kMaxNodes * kMaxNodeDevices]),
      host_counts_(new std::atomic<uint64_t>[kMaxNodes * kMaxNodeDevices]) {
  for (size_t i = 0; i < kShards; ++i) shards_.push_back(std::make_unique<Shard>());
  for (size_t i = 0; i < kMaxNodes * kMaxNodeDevices; ++i) {
    counts_[i].store(0, std::memory_order_relaxed);
    host_counts_[i].store(0, std::memory_order_relaxed);
  }
}

void MasterIndex::Count(const CopyRef& copy, int delta) {
  const size_t at = copy.node * kMaxNodeDevices + copy.device;
  for (auto* count : {&counts_[at], copy.tier == kCopyInHostTier ? &host_counts_[at] : nullptr}) {
    if (count == nullptr) continue;
    if (delta > 0) {
      count->fetch_add(1, std::memory_order_relaxed);
    } else {
      count->fetch_sub(1, std::memory_order_relaxed);
    }
  }
}

void MasterIndex::AddCopyLocked(Shard& shard, std::string_view key, uint64_t hash, uint64_t bytes_total,
                                CopyRef copy) {
  // A refreshed copy (same node) may sit on another device after the node
  // restarted between a removal and its event: count it where it is now.
  uint64_t old_bytes = 0;
  std::vector<CopyRef> before;
  bool present = shard.table.Find(key, hash, &old_bytes, &before);
  if (shard.table.AddCopy(key, hash, bytes_total, copy)) {
    Count(copy, +1);
    return;
  }
  if (!present) return;
  for (const CopyRef& old : before) {
    // Counted where it is now: another device, or another tier (a move).
    if (old.node == copy.node && (old.device != copy.device || old.tier != copy.tier)) {
      Count(old, -1);
      Count(copy, +1);
    }
  }
}

Result<uint64_t> MasterIndex::BeginWrite(std::string_view key, uint64_t bytes_total) {
  const uint64_t hash = KeyHash(key);
  Shard& shard = ShardOf(hash);
  std::lock_guard lock(shard.mu);
  if (shard.table.Contains(key, hash)) {
    return Status::AlreadyExists("open of " + Quote(key) + ": the key is READY (remove it first)");
  }
  std::string owned(key);
  if (auto it = shard.writes.find(owned); it != shard.writes.end()) {
    return Status::FailedPrecondition("open of " + Quote(key) + ": the key is being written (write " +
                                      std::to_string(it->second.id) + ") until it is committed or revoked");
  }
  if (shard.removing.count(owned) != 0) {
    return Status::FailedPrecondition("open of " + Quote(key) + ": the key is being removed");
  }
  Write write;
  write.id = next_write_id_.fetch_add(1, std::memory_order_relaxed);
  write.bytes_total = bytes_total;
  uint64_t id = write.id;
  shard.writes.emplace(std::move(owned), std::move(write));
  return id;
}

bool MasterIndex::AddPlanned(std::string_view key, uint64_t write_id, CopyRef copy) {
  Shard& shard = ShardOf(KeyHash(key));
  std::lock_guard lock(shard.mu);
  auto it = shard.writes.find(std::string(key));
  if (it == shard.writes.end() || it->second.id != write_id || it->second.finishing) return false;
  for (const CopyRef& have : it->second.copies) {
    if (have.node == copy.node) return false;
  }
  it->second.copies.push_back(copy);
  return true;
}

void MasterIndex::EndPlanning(std::string_view key, uint64_t write_id) {
  Shard& shard = ShardOf(KeyHash(key));
  std::lock_guard lock(shard.mu);
  auto it = shard.writes.find(std::string(key));
  if (it == shard.writes.end() || it->second.id != write_id) return;
  it->second.planning = false;
  if (it->second.copies.empty() && !it->second.finishing) shard.writes.erase(it);
}

Result<std::vector<CopyRef>> MasterIndex::StartFinish(std::string_view key, uint64_t write_id, bool commit) {
  Shard& shard = ShardOf(KeyHash(key));
  std::lock_guard lock(shard.mu);
  const char* what = commit ? "commit" : "revoke";
  auto it = shard.writes.find(std::string(key));
  if (it == shard.writes.end() || it->second.id != write_id) {
    return Status::NotFound(std::string(what) + " of " + Quote(key) + ": no write " + std::to_string(write_id) +
                            " in progress (committed, revoked, or reclaimed on its nodes)");
  }
  if (it->second.finishing) {
    return Status::FailedPrecondition(std::string(what) + " of " + Quote(key) + ": write " +
                                      std::to_string(write_id) + " is being committed or revoked already");
  }
  it->second.finishing = true;
  return it->second.copies;
}

void MasterIndex::AddCommitted(std::string_view key, uint64_t write_id, CopyRef copy) {
  const uint64_t hash = KeyHash(key);
  Shard& shard = ShardOf(hash);
  std::lock_guard lock(shard.mu);
  auto it = shard.writes.find(std::string(key));
  if (it == shard.writes.end() || it->second.id != write_id) return;
  AddCopyLocked(shard, key, hash, it->second.bytes_total, copy);
}

void MasterIndex::EndWrite(std::string_view key, uint64_t write_id) {
  Shard& shard = ShardOf(KeyHash(key));
  std::lock_guard lock(shard.mu);
  auto it = shard.writes.find(std::string(key));
  if (it != shard.writes.end() && it->second.id == write_id) shard.writes.erase(it);
}

bool MasterIndex::AddCopy(std::string_view key, uint64_t bytes_total, CopyRef copy, uint64_t node_limit) {
  const uint64_t hash = KeyHash(key);
  Shard& shard = ShardOf(hash);
  std::lock_guard lock(shard.mu);
  if (copies_of(copy.node) >= node_limit) {
    std::vector<CopyRef> copies;
    shard.table.Find(key, hash, nullptr, &copies);
    const bool has = std::any_of(copies.begin(), copies.end(), [&](const CopyRef& c) { return c.node == copy.node; });
    if (!has) return false;
  }
  AddCopyLocked(shard, key, hash, bytes_total, copy);
  return true;
}

uint64_t MasterIndex::copies_of(uint16_t node) const {
  uint64_t n = 0;
  for (size_t d = 0; d < kMaxNodeDevices; ++d) n += copies_on(node, static_cast<uint8_t>(d));
  return n;
}

void MasterIndex::RemoveCopy(std::string_view key, uint16_t node, uint32_t epoch) {
  const uint64_t hash = KeyHash(key);
  Shard& shard = ShardOf(hash);
  std::lock_guard lock(shard.mu);
  CopyRef removed;
  if (shard.table.RemoveCopy(key, hash, node, epoch, &removed)) Count(removed, -1);
  auto it = shard.writes.find(std::string(key));
  if (it == shard.writes.end()) return;
  auto& copies = it->second.copies;
  const size_t before = copies.size();
  copies.erase(std::remove_if(copies.begin(), copies.end(),
                              [&](const CopyRef& c) { return c.node == node && (epoch == 0 || c.epoch == epoch); }),
               copies.end());
  // Every planned copy reclaimed or revoked on its node: nothing is left to
  // commit (one being planned, committed or revoked ends by its own orders;
  // an event of the key's earlier object touches none of its copies).
  if (copies.size() < before && copies.empty() && !it->second.planning && !it->second.finishing) {
    shard.writes.erase(it);
  }
}

size_t MasterIndex::RemoveNode(uint16_t node) {
  size_t removed = 0;
  for (auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    removed += shard->table.RemoveNode(node, [&](const CopyRef& copy) { Count(copy, -1); });
    for (auto it = shard->writes.begin(); it != shard->writes.end();) {
      auto& copies = it->second.copies;
      const size_t before = copies.size();
      copies.erase(std::remove_if(copies.begin(), copies.end(), [&](const CopyRef& c) { return c.node == node; }),
                   copies.end());
      // A write planned only there: gone with the node, unless its open,
      // commit or revoke is under way (it ends when its orders answer).
      if (copies.size() < before && copies.empty() && !it->second.planning && !it->second.finishing) {
        it = shard->writes.erase(it);
      } else {
        ++it;
      }
    }
  }
  return removed;
}

Result<std::vector<CopyRef>> MasterIndex::StartRemove(std::string_view key) {
  const uint64_t hash = KeyHash(key);
  Shard& shard = ShardOf(hash);
  std::lock_guard lock(shard.mu);
  std::string owned(key);
  if (shard.removing.count(owned) != 0) {
    return Status::FailedPrecondition("remove of " + Quote(key) + ": being removed already");
  }
  std::vector<CopyRef> copies;
  if (!shard.table.Find(key, hash, nullptr, &copies)) {
    if (shard.writes.count(owned) != 0) {
      return Status::FailedPrecondition("remove of " + Quote(key) +
                                        ": the key is being written (revoke the write instead)");
    }
    return Status::NotFound("remove of " + Quote(key) + ": no such object on any live node");
  }
  shard.removing.insert(std::move(owned));
  return copies;
}

void MasterIndex::EndRemove(std::string_view key, const std::vector<CopyRef>& removed) {
  const uint64_t hash = KeyHash(key);
  Shard& shard = ShardOf(hash);
  std::lock_guard lock(shard.mu);
  for (const CopyRef& copy : removed) {
    CopyRef gone;
    if (shard.table.RemoveCopy(key, hash, copy.node, copy.epoch, &gone)) Count(gone, -1);
  }
  shard.removing.erase(std::string(key));
}

Result<MasterIndex::Found> MasterIndex::Find(std::string_view key) const {
  const uint64_t hash = KeyHash(key);
  const Shard& shard = ShardOf(hash);
  std::lock_guard lock(shard.mu);
  Found found;
  if (shard.table.Find(key, hash, &found.bytes_total, &found.copies)) return found;
  if (shard.writes.count(std::string(key)) != 0) {
    return Status::FailedPrecondition("locate of " + Quote(key) + ": being written, not READY yet");
  }
  return Status::NotFound("locate of " + Quote(key) + ": no READY copy on any live node");
}

bool MasterIndex::ListFrom(size_t shard, size_t* cursor, size_t max,
                           const std::function<void(std::string_view, uint64_t, const std::vector<CopyRef>&)>& row)
    const {
  const Shard& s = *shards_[shard];
  std::lock_guard lock(s.mu);
  s.table.ListFrom(cursor, max, row);
  return *cursor < s.table.capacity();
}

size_t MasterIndex::objects() const {
  size_t n = 0;
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    n += shard->table.size();
  }
  return n;
}

size_t MasterIndex::writes_in_progress() const {
  size_t n = 0;
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    n += shard->writes.size();
  }
  return n;
}

size_t MasterIndex::MemoryBytes() const {
  size_t bytes = kMaxNodes * kMaxNodeDevices * sizeof(std::atomic<uint64_t>);
  for (const auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    bytes += shard->table.MemoryBytes();
  }
  return bytes;
}

void MasterIndex::Clear() {
  for (auto& shard : shards_) {
    std::lock_guard lock(shard->mu);
    shard->table = ObjectTable();
    shard->writes.clear();
    shard->removing.clear();
  }
  for (size_t i = 0; i < kMaxNodes * kMaxNodeDevices; ++i) {
    counts_[i].store(0, std::memory_order_relaxed);
    host_counts_[i].store(0, std::memory_order_relaxed);
  }
}

Status MasterIndex::CheckInvariants() const {
  std::vector<uint64_t> counted(kMaxNodes * kMaxNodeDevices, 0), host_counted(counted.size(), 0);
  for (size_t s = 0; s < kShards; ++s) {
    const Shard& shard = *shards_[s];
    std::lock_guard lock(shard.mu);
    if (!shard.table.CheckInvariants()) return Status::Internal("index shard " + std::to_string(s) + " is malformed");
    size_t cursor = 0;
    bool bad_tier = false;
    shard.table.ListFrom(&cursor, shard.table.size() + 1,
                         [&](std::string_view, uint64_t, const std::vector<CopyRef>& copies) {
                           for (const CopyRef& c : copies) {
                             ++counted[c.node * kMaxNodeDevices + c.device];
                             if (c.tier == kCopyInHostTier) ++host_counted[c.node * kMaxNodeDevices + c.device];
                             bad_tier = bad_tier || c.tier > kCopyInHostTier;
                           }
                         });
    if (bad_tier) return Status::Internal("index shard " + std::to_string(s) + " holds a copy of no known tier");
    for (const auto& [key, write] : shard.writes) {
      for (size_t i = 0; i < write.copies.size(); ++i) {
        for (size_t j = i + 1; j < write.copies.size(); ++j) {
          if (write.copies[i].node == write.copies[j].node) {
            return Status::Internal("write of '" + key + "' has two copies on node " +
                                    std::to_string(write.copies[i].node));
          }
        }
      }
    }
  }
  for (size_t i = 0; i < counted.size(); ++i) {
    if (counted[i] != counts_[i].load(std::memory_order_relaxed)) {
      return Status::Internal("node " + std::to_string(i / kMaxNodeDevices) + " device " +
                              std::to_string(i % kMaxNodeDevices) + ": counted " + std::to_string(counted[i]) +
                              " copies, the index says " + std::to_string(counts_[i].load()));
    }
    if (host_counted[i] != host_counts_[i].load(std::memory_order_relaxed)) {
      return Status::Internal("node " + std::to_string(i / kMaxNodeDevices) + " device " +
                              std::to_string(i % kMaxNodeDevices) + ": counted " + std::to_string(host_counted[i]) +
                              " host-tier copies, the index says " + std::to_string(host_counts_[i].load()));
    }
  }
  return Status::OK();
}

}  // namespace nanokv::master
