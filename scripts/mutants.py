#!/usr/bin/env python3
"""Mutation testing: do the tests catch the defects they claim to?

Each mutant below is one small plausible defect in kvd's or libkv's
accounting, quota, share, evict, detach, reclaim or object-state code. The
script applies one at a time to the source, rebuilds what changed (ninja, in a
build directory of its own), runs the suite without the chaos run (its
random kills are the last line of defence, not the one we want to rely on),
restores the source, and reports which tests killed each mutant. A mutant no
test kills is a survivor: a gap in the suite, or a change that is harmless
(then say why in docs/RELIABILITY.md).

  scripts/mutants.py                 every mutant (about a minute each on 2 cores)
  scripts/mutants.py --list          the mutants, without running anything
  scripts/mutants.py --only NAME...  some of them
  scripts/mutants.py --json FILE     also write the results as JSON

Not run by CI: too slow for it. The source is always restored, also on
Ctrl-C; the script refuses to start on a tree with uncommitted changes to a
file it mutates.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Mutant:
    name: str
    file: str
    old: str   # must occur exactly once in `file`
    new: str
    what: str  # the defect, in words


MUTANTS = [
    # ---- the request ring (ipc/ring/): kvd reads what a client wrote ----
    Mutant("ring-stamp-of-no-lap-ignored", "ipc/ring/request_ring.cc",
           "if (RingCellHoldsNothing(in_cell_, stamp)) return false;",
           "return false;",
           "a scribbled stamp reads as an empty ring instead of a fault"),
    Mutant("ring-other-cells-trusted", "ipc/ring/request_ring.cc",
           "if (i > 0 && (Atomic(cell.stamp).load(std::memory_order_relaxed) != RingStampAt(in_cell_ + i) ||",
           "if (false && (Atomic(cell.stamp).load(std::memory_order_relaxed) != RingStampAt(in_cell_ + i) ||",
           "a message's later cells are read without checking they are its"),
    Mutant("ring-reader-head-trusted", "ipc/ring/request_ring.cc",
           "if (head - out_head_seen_ > out_cell_ - out_head_seen_) {",
           "if (false) {",
           "a reader's head ahead of what was written is believed: the writer overwrites unread cells"),
    # ---- quotas and limits (daemon/node/) ----
    Mutant("quota-off-by-one", "daemon/node/node_state.cc",
           "if (used + asked > tenant.limit_bytes) {",
           "if (used + asked > tenant.limit_bytes + page_bytes_) {",
           "a grant may take a tenant one page over its limit"),
    Mutant("quota-ignores-reclaiming", "daemon/node/node_state.cc",
           "if (tenant.state == TenantState::kReclaiming) {",
           "if (false && tenant.state == TenantState::kReclaiming) {",
           "a tenant asked to give pages back is still granted new ones"),
    Mutant("limit-not-clamped", "daemon/node/node_state_limits.cc",
           "  if (limit > capacity) {",
           "  if (false) {",
           "a limit above the node's capacity is kept as asked"),
    Mutant("limit-over-ceiling", "daemon/node/node_state_limits.cc",
           "} else if (limit > tenant->ceiling_bytes) {",
           "} else if (false) {",
           "an engine raises its own limit over the operator's ceiling"),
    Mutant("reclaim-never-ends", "daemon/node/node_state.cc",
           "if (tenant.state == TenantState::kReclaiming && UsedBytes(tenant) <= tenant.limit_bytes) {",
           "if (tenant.state == TenantState::kReclaiming && UsedBytes(tenant) < tenant.limit_bytes) {",
           "a tenant back exactly at its limit stays reclaiming"),
    Mutant("reclaim-rounds-down", "daemon/node/node_state_limits.cc",
           "auto pages = static_cast<uint32_t>((excess + page_bytes_ - 1) / page_bytes_);",
           "auto pages = static_cast<uint32_t>(excess / page_bytes_);",
           "a lowered limit asks for one page too few when the excess is not whole pages"),
    Mutant("evict-asks-one-less", "daemon/node/node_state_limits.cc",
           "if (pages == 0 || pages > held) pages = held;",
           "if (pages == 0 || pages > held) pages = held > 0 ? held - 1 : 0;",
           "kvctl evict of all a tenant's pages asks for one page too few"),
    # ---- grants, shares, returns, detach (daemon/node/) ----
    Mutant("device-full-off-by-one", "daemon/node/node_state.cc",
           "if (obtainable < count) {",
           "if (obtainable + 1 < count) {",
           "a grant one page larger than what is left is accepted, then fails part-way"),
    Mutant("share-cross-group-code", "daemon/node/node_state.cc",
           "return Status::PermissionDenied(which + \" is not owned by group '\" + tenant->group + \"'\");",
           "return Status::FailedPrecondition(which + \" is not owned by group '\" + tenant->group + \"'\");",
           "a share of another group's page is answered with the wrong code"),
    Mutant("share-any-group", "daemon/node/node_state.cc",
           "if (!owned || page.group != tenant->group_index) {",
           "if (!owned) {",
           "a tenant may share a page of another group (invariant 2)"),
    Mutant("return-not-all-or-none", "daemon/node/node_state.cc",
           "return Status::FailedPrecondition(\"return of page \" + std::to_string(id) +",
           "continue; return Status::FailedPrecondition(\"return of page \" + std::to_string(id) +",
           "a return naming a page the tenant does not hold is accepted"),
    Mutant("detach-skips-last-page", "daemon/node/node_state.cc",
           "for (PageId id = 0; id < devices_[d].pages.size(); ++id) {\n"
           "      const auto& holders = devices_[d].pages[id].holders;",
           "for (PageId id = 0; id + 1 < devices_[d].pages.size(); ++id) {\n"
           "      const auto& holders = devices_[d].pages[id].holders;",
           "a detach forgets the last page of each device"),
    Mutant("recycle-keeps-generation", "daemon/node/node_state_recycle.cc",
           "  PageInfo& page = devices_[d].pages[id];\n  ++page.generation;\n",
           "  PageInfo& page = devices_[d].pages[id];\n",
           "a recycled page keeps its generation: engines reuse their stale handle"),
    Mutant("recycle-no-forget", "daemon/node/node_state_recycle.cc",
           "    QueueForget(tenant_id, pools_[d]->device(), id);",
           "    (void)tenant_id;",
           "the old group's engines are not told to forget a recycled page"),
    Mutant("recycle-charge-forgotten", "daemon/node/page_pool.cc",
           "const bool held = still_held_ && still_held_(other);",
           "const bool held = false;",
           "a page recycled away that an engine still holds is replaced at once: memory past the capacity"),
    Mutant("forget-done-ignored", "daemon/node/node_state_recycle.cc",
           "    DropHeldAfterRecycle(d, tenant_id, *it);",
           "    (void)it;",
           "an engine's word that it dropped a recycled page never gives its room back"),
    Mutant("quota-ignores-kept-pages", "daemon/node/node_state.cc",
           "const uint64_t kept = HeldAfterRecyclePages(tenant) * page_bytes_;",
           "const uint64_t kept = 0;",
           "pages an engine keeps after a recycle do not count against its quota"),
    # ---- the page pool (daemon/node/) ----
    Mutant("pool-free-never-granted", "daemon/node/page_pool.cc",
           "    if (state == SlotState::kGranted) [[likely]] {\n      --granted_;",
           "    if (state == SlotState::kGranted || state == SlotState::kFree) [[likely]] {\n      --granted_;",
           "a created page no group was granted may be freed (onto a group's list)"),
    Mutant("pool-double-free-group", "daemon/node/page_pool.cc",
           "    if (state == SlotState::kGranted) [[likely]] {\n      --granted_;",
           "    if (state == SlotState::kGranted || state == SlotState::kGroupFree) [[likely]] {\n      --granted_;",
           "a page freed twice is pushed twice onto its group's free list"),
    Mutant("pool-reserve-one-short", "daemon/node/page_pool.cc",
           "if (free_count_ >= reserve_ || !RoomLocked()) {",
           "if (free_count_ + 1 >= reserve_ || !RoomLocked()) {",
           "the refill thread stops one page short of the reserve"),
    # ---- objects (daemon/objects/) ----
    Mutant("commit-stale-epoch-code", "daemon/objects/object_index.cc",
           'return Status::FailedPrecondition("commit of " + Quote(key) + " with stale epoch " +',
           'return Status::NotFound("commit of " + Quote(key) + " with stale epoch " +',
           "a commit with a stale epoch is answered with the wrong code"),
    Mutant("commit-twice", "daemon/objects/object_index.cc",
           "  if (object->state == ObjectState::kReady) {\n"
           '    return Status::FailedPrecondition("commit of " + Quote(key) + ": already READY',
           "  if (false) {\n"
           '    return Status::FailedPrecondition("commit of " + Quote(key) + ": already READY',
           "a READY object may be committed again"),
    Mutant("revoke-ready", "daemon/objects/object_index.cc",
           "  if (object->state == ObjectState::kReady) {\n"
           '    return Status::FailedPrecondition("revoke of " + Quote(key) + ": it is READY',
           "  if (false) {\n"
           '    return Status::FailedPrecondition("revoke of " + Quote(key) + ": it is READY',
           "a READY object may be revoked (it is final)"),
    Mutant("remove-under-lease", "daemon/objects/object_index.cc",
           "  if (table_.Leased(*object, now_ns)) {\n"
           '    return Status::FailedPrecondition("remove of "',
           "  if (false && table_.Leased(*object, now_ns)) {\n"
           '    return Status::FailedPrecondition("remove of "',
           "an object under a read lease may be removed"),
    Mutant("leases-unbounded", "daemon/objects/object_table.cc",
           "if (count != leases_per_holder_.end() && count->second >= config_.max_leases) {",
           "if (false) {",
           "a client may hold any number of read leases"),
    Mutant("evict-hard-pin", "daemon/objects/eviction_order.cc",
           "    if (object->pin == ObjectPin::kHard) continue;\n",
           "",
           "eviction takes hard-pinned objects"),
    Mutant("evict-leased", "daemon/objects/eviction_order.cc",
           "    if (leased(*object)) continue;\n",
           "    if (false && leased(*object)) continue;\n",
           "eviction takes leased objects"),
    Mutant("evict-ignores-own-size", "daemon/objects/object_index.cc",
           "EvictDownTo(d, low > need ? low - need : 0, now_ns);",
           "EvictDownTo(d, low, now_ns);",
           "eviction stops at the low watermark without room for the object being written"),
    Mutant("write-fd-for-any-page", "daemon/objects/object_index_headers.cc",
           "                          : claim.uid == object->owner;",
           "                          : true;",
           "a peer gets write fds for pages of another uid's open plans"),
    Mutant("owners-share-pages", "daemon/objects/owned_space.cc",
           "Result<uint64_t> OwnedSpace::Allocate(uint32_t owner, uint64_t bytes) {\n",
           "Result<uint64_t> OwnedSpace::Allocate(uint32_t owner, uint64_t bytes) {\n  owner = 0;\n",
           "objects of different owners share payload pages (a write fd covers another's READY bytes)"),
    Mutant("lent-page-not-kept", "daemon/objects/owned_space.cc",
           "    if (page_[p].holds == 0) MakeIdle(p);",
           "    MakeIdle(p);",
           "a page lent for writing returns to shared use while its holder may still write it"),
    Mutant("readers-get-writable-fds", "daemon/server/node_server_objects.cc",
           "if (fd.ok() && r.write()) {",
           "if (fd.ok()) {",
           "a reader of READY objects gets fds it can write through"),
    Mutant("readers-map-read-write", "libkv/client/object_mappings.cc",
           "Status read_only = backend_.SetAccess(at, map.page_bytes, AccessOf(device), gpu::Access::kReadOnly);",
           "Status read_only = backend_.SetAccess(at, map.page_bytes, AccessOf(device));",
           "a reader maps READY objects read-write"),
    # ---- the engine side (libkv/client/) ----
    Mutant("client-reclaim-count-stays", "libkv/client/client_reader.cc",
           "if (message.has_return_reply()) NoteReturned(message.return_reply().returned());",
           "if (false) NoteReturned(message.return_reply().returned());",
           "pages returned do not lower the count kvd still wants back"),
    Mutant("client-no-forget-done", "libkv/client/client_reader.cc",
           "      SendForgetDone(forget.device(), ids);",
           "      (void)ids;",
           "libkv drops a recycled page but never says so: its old room stays charged"),
    Mutant("client-stale-generation", "libkv/client/page_cache.cc",
           "if (it == entries_.end() || it->second.generation != page.generation) {",
           "if (it == entries_.end()) {",
           "a grant of a recycled page without an fd is served by the old generation's handle"),
    # ---- kvd off the GPU, gets in one request, no fd a page at rest (issues 15, 16) ----
    Mutant("kvd-stores-dead-again", "daemon/objects/object_index_evict.cc",
           "  object->state = ObjectState::kDead;\n  Notify(*object, why);",
           "  object->state = ObjectState::kDead;\n  { uint32_t d = 4; (void)backend_.Copy(reinterpret_cast<void*>(devices_[object->device].range->base() + uint64_t{object->slot} * sizeof(ObjectHeader) + kObjectHeaderStateOffset), &d, 4, gpu::CopyKind::kHostToDevice); }\n  Notify(*object, why);",
           "kvd stores DEAD on the device at remove/evict/reclaim again (GPU work while it serves)"),
    Mutant("epoch-not-per-slot", "daemon/objects/object_index.cc",
           "  object.epoch = NextEpoch(device);",
           "  object.epoch = device.slot_epochs[slot] != 0 ? device.slot_epochs[slot] : NextEpoch(device);",
           "a reused header slot gets the epoch of its previous object"),
    Mutant("lease-release-anyones", "daemon/objects/object_table.cc",
           "  if (holder != kKvdCallers && object.leases.contains(lease_id) && record != leases_.end() &&",
           "  if (false && holder != kKvdCallers && object.leases.contains(lease_id) && record != leases_.end() &&",
           "any uid may end another uid's lease early"),
    Mutant("pool-keeps-taken-fd", "daemon/node/page_pool.cc",
           "    if (slot.fd >= 0) return std::exchange(slot.fd, -1);",
           "    if (slot.fd >= 0) return fcntl(slot.fd, F_DUPFD_CLOEXEC, 0);",
           "a granted page keeps its export in kvd after it is sent (an fd per page at rest)"),
    # ---- the host tier under the store (object_index_tier.cc, object_index_moves.cc) ----
    Mutant("demotion-ignores-a-lease-mid-copy", "daemon/objects/object_index_moves.cc",
           "if (!copied.ok() || table_.Leased(*object, now_ns)) {",
           "if (!copied.ok() || (move.to == Tier::kGpu && table_.Leased(*object, now_ns))) {",
           "a demotion finishes under a reader's lease: the store space it reads is freed"),
    Mutant("remove-mid-move-frees-the-reservation", "daemon/objects/object_index_evict.cc",
           "if (object->move.active) OrphanMove(*object);",
           "if (object->move.active) ReleaseMove(object);",
           "a remove mid-promotion frees the store space the copy is still writing"),
    Mutant("demotion-keeps-store-space", "daemon/objects/object_index_moves.cc",
           "    Status freed = device.payload->Free(object->payload_offset - device.arena_pages * page_bytes_);\n"
           "    if (!freed.ok()) spdlog::error(\"object store: {}\", freed.ToString());\n    FreeSlot(device, object->slot);",
           "    FreeSlot(device, object->slot);",
           "a demoted object's store space is never freed"),
    Mutant("promotion-keeps-the-old-epoch", "daemon/objects/object_index_moves.cc",
           "    object->epoch = object->move.epoch;\n",
           "",
           "a promoted object keeps its old epoch: its READY header names another"),
    Mutant("host-object-journaled", "daemon/objects/object_table.cc",
           "  record.slot = object.tier == Tier::kGpu ? object.slot : 0;",
           "  record.slot = object.slot;",
           "a host-tier object's record names the store slot and an offset it left (a restart could read them)"),
    Mutant("write-drops-despite-a-tier", "daemon/objects/object_index.cc",
           "  if (device.host_space) return AllocateOverHostTier(d, bytes, owner, now_ns);\n",
           "",
           "with a host tier a write still makes room by dropping READY objects"),
    # ---- the object store across a kvd crash ----
    Mutant("journal-keeps-removed", "daemon/objects/object_index_evict.cc",
           "  table_.ClearRecord(object->device, object->record);",
           "  (void)object->record;",
           "a removed or evicted object keeps its object journal record: it comes back after a crash"),
    Mutant("recover-uncommitted", "daemon/objects/object_recovery.cc",
           "std::optional<std::string> header = object->committed ? HeaderFault(",
           "std::optional<std::string> header = true ? HeaderFault(",
           "a write kvd never committed comes back READY after a crash when its header says so"),
    Mutant("recover-any-epoch", "daemon/objects/object_recovery.cc",
           "  if (header.epoch != object.epoch) {",
           "  if (false) {",
           "a header of the slot's next object (another epoch) vouches for a recorded one"),
    # ---- pages handed back by id after a restart ----
    Mutant("handleless-shared", "daemon/node/node_state.cc",
           "    if (page.handleless) {\n      return Status::FailedPrecondition(",
           "    if (false) {\n      return Status::FailedPrecondition(",
           "a group-mate may share a page kvd has no handle of (it would be sent no fd)"),
    Mutant("handleless-put-back", "daemon/node/node_state.cc",
           "    if (page.handleless) return UncreateHandleless(d, id);",
           "    if (false) return UncreateHandleless(d, id);",
           "a page adopted without a handle goes to its group's free list when returned"),
    Mutant("client-keeps-page-fd", "libkv/client/page_cache.cc",
           "    auto handle = backend_.ImportPage(fd, local_device, page_bytes_);",
           "    if (dup(fd) < 0) {}\n    auto handle = backend_.ImportPage(fd, local_device, page_bytes_);",
           "the engine keeps an fd per page it maps"),
]


def run(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, text=True, capture_output=True, **kw)


def configure(build):
    if os.path.exists(os.path.join(build, "build.ninja")):
        return
    cmd = ["cmake", "-S", ".", "-B", build, "-G", "Ninja", "-DNANOKV_CUDA_KERNELS=OFF",
           "-DNANOKV_BUILD_BENCH=OFF"]
    if run(["sh", "-c", "command -v ccache"]).returncode == 0:
        cmd += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def build_ok(build):
    return run(["ninja", "-C", build, f"-j{os.cpu_count() or 2}"]).returncode == 0


def failing_tests(build):
    """Runs the suite but the chaos label; returns the names of the tests that failed."""
    out = subprocess.run(["ctest", "-j", str(os.cpu_count() or 2), "-LE", "chaos", "--timeout", "300"],
                         cwd=os.path.join(ROOT, build), text=True, capture_output=True).stdout
    marker = "The following tests FAILED:"
    if marker not in out:
        return []
    return re.findall(r"^\s*\d+ - (\S+)", out.split(marker)[-1], re.M)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build-mutants")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    mutants = [m for m in MUTANTS if not args.only or m.name in args.only]
    if args.list:
        for m in mutants:
            print(f"{m.name:28} {m.file}: {m.what}")
        return 0
    for m in mutants:
        text = open(os.path.join(ROOT, m.file)).read()
        if text.count(m.old) != 1:
            sys.exit(f"mutants: {m.name}: its text is found {text.count(m.old)} times in {m.file} "
                     "(the code moved: update the mutant)")
    dirty = run(["git", "status", "--porcelain", "--"] + sorted({m.file for m in mutants})).stdout
    if dirty.strip():
        sys.exit("mutants: commit or stash these first:\n" + dirty)

    configure(args.build)
    if not build_ok(args.build):
        sys.exit("mutants: the unmutated tree does not build")
    if failing_tests(args.build):
        sys.exit("mutants: the unmutated tree fails tests: fix that first")

    results = []
    for m in mutants:
        path = os.path.join(ROOT, m.file)
        original = open(path).read()
        started = time.time()
        try:
            with open(path, "w") as f:
                f.write(original.replace(m.old, m.new))
            if not build_ok(args.build):
                outcome, killers = "stillborn", []
            else:
                killers = failing_tests(args.build)
                outcome = "killed" if killers else "SURVIVED"
        finally:
            with open(path, "w") as f:
                f.write(original)
        results.append({"name": m.name, "file": m.file, "what": m.what, "outcome": outcome,
                        "killed_by": killers, "seconds": round(time.time() - started)})
        print(f"{outcome:9} {m.name:28} {len(killers):3} tests  ({', '.join(killers[:4])}"
              f"{', ...' if len(killers) > 4 else ''})", flush=True)
    build_ok(args.build)  # leave the build matching the restored source

    survivors = [r["name"] for r in results if r["outcome"] == "SURVIVED"]
    print(f"\n{len(results)} mutants: {sum(r['outcome'] == 'killed' for r in results)} killed, "
          f"{len(survivors)} survived{': ' + ', '.join(survivors) if survivors else ''}, "
          f"{sum(r['outcome'] == 'stillborn' for r in results)} did not build")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
