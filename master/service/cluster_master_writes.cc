// The master's writes: open (route, order plans from the owners, retry the
// next store when one refuses), commit and revoke (ordered to every node of
// the write), and remove (ordered to every node holding a copy).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "ipc/master/grpc_status.h"
#include "ipc/master/master_checks.h"
#include "master/nodes/orders.h"
#include "master/routing/router.h"
#include "master/service/cluster_master.h"

namespace nanokv::master {
namespace {

// Refusals a next store may not give: worth trying there.
bool TryElsewhere(const Status& status) {
  return status.code() == Code::kResourceExhausted || status.code() == Code::kOutOfMemory ||
         status.code() == Code::kUnavailable;
}

// Rounded as kvd's payload allocator rounds (256 bytes): what a plan takes.
uint64_t Rounded(uint64_t bytes) { return (bytes + 255) & ~uint64_t{255}; }

}  // namespace

// One open request: every item routed, ordered from its stores in rounds
// (the first copies, then retries where a store refused), answered once the
// last round is in.
class ClusterMaster::OpenJob : public std::enable_shared_from_this<OpenJob> {
 public:
  OpenJob(ClusterMaster& master, std::function<void(v1::OpenReply)> done)
      : master_(master), done_(std::move(done)), term_(master.term()), stores_(master.nodes_.Stores()) {}

  void Start(const v1::OpenRequest& request) {
    items_.resize(static_cast<size_t>(request.items_size()));
    std::vector<Attempt> first;
    for (size_t i = 0; i < items_.size(); ++i) {
      const v1::WriteItem& in = request.items(static_cast<int>(i));
      Item& item = items_[i];
      item.key = in.key();
      item.bytes = in.bytes_total();
      item.wanted = std::max<uint32_t>(1, in.replica_num());
      item.status = CheckWriteItem(in);
      if (!item.status.ok()) continue;
      Segment preferred = *ParseSegment(in.preferred_segment());
      auto write = master_.index_.BeginWrite(item.key, item.bytes);
      if (!write.ok()) {
        item.status = write.status();
        continue;
      }
      item.write_id = *write;
      item.ranking = RankStores(*stores_, KeyHash(item.key), preferred, item.bytes);
      if (item.ranking.empty()) {
        item.status = Status::Unavailable("open of '" + item.key + "': no live node has a store that holds " +
                                          std::to_string(item.bytes) + " bytes");
        master_.index_.EndWrite(item.key, item.write_id);
        continue;
      }
      for (uint32_t c = 0; c < item.wanted; ++c) Next(i, &first);
    }
    rounds_ = 1;
    Dispatch(std::move(first));
  }

 private:
  struct Item {
    std::string key;
    uint64_t bytes = 0;
    uint32_t wanted = 1;
    Status status;              // not OK: failed before any order
    uint64_t write_id = 0;
    std::vector<size_t> ranking;  // stores to try, in order
    size_t next = 0;              // the next of them
    std::set<uint16_t> busy;      // nodes with a copy or an order in flight
    uint32_t attempts = 0;
    std::vector<v1::ReplicaPlan> plans;
    Status last_error;
  };
  struct Attempt {
    size_t item;
    size_t store;
  };

  // Picks the item's next store on a node it has no copy on. REQUIRES: mu_
  // held, or no other thread yet (Start).
  void Next(size_t i, std::vector<Attempt>* out) {
    Item& item = items_[i];
    if (item.attempts >= item.wanted + 4) return;  // enough tries: give up on this copy
    while (item.next < item.ranking.size()) {
      size_t store = item.ranking[item.next++];
      const StoreView& view = (*stores_)[store];
      if (master_.index_.copies_of(view.node) >= master_.options_.max_objects_per_node) {
        item.last_error = Status::ResourceExhausted("open of '" + item.key + "': node " + view.node_id + " holds " +
                                                    std::to_string(master_.options_.max_objects_per_node) +
                                                    " objects, the master's max_objects_per_node");
        continue;
      }
      if (item.busy.insert(view.node).second) {
        ++item.attempts;
        out->push_back({i, store});
        return;
      }
    }
  }

  void Dispatch(std::vector<Attempt> attempts) {
    std::vector<Order> orders;
    for (const Attempt& a : attempts) {
      const StoreView& store = (*stores_)[a.store];
      Order order;
      order.node = store.node;
      order.plan.set_key(items_[a.item].key);
      order.plan.set_bytes_total(items_[a.item].bytes);
      order.plan.set_device(store.device);
      orders.push_back(std::move(order));
    }
    auto self = shared_from_this();
    SendOrders(
        master_.nodes_, term_, OrderKind::kOpen, std::move(orders),
        [self, attempts](size_t k, const Status& status, wire::ObjectPlan* plan, SessionRef session) {
          self->OnAnswer(attempts[k], status, plan, session);
        },
        [self] { self->EndRound(); });
  }

  // `plan`: the node's answer, taken into the item's plans.
  void OnAnswer(const Attempt& attempt, Status status, wire::ObjectPlan* plan, SessionRef session) {
    const StoreView& store = (*stores_)[attempt.store];
    if (status.ok()) {
      CopyRef copy{store.node, static_cast<uint8_t>(store.device), 0, plan->epoch()};
      bool kept = false;
      master_.nodes_.WithLiveSession(session, [&] {
        // The ranking is older than the answer: a node that died since may
        // have left its slot to another, which made this plan. Its plan is
        // revoked, never handed out under the dead node's name.
        if (!master_.nodes_.HasId(session.node, store.node_id)) return;
        kept = master_.index_.AddPlanned(items_[attempt.item].key, items_[attempt.item].write_id, copy);
      });
      if (!kept) {
        RevokeOrphan(store, items_[attempt.item].key, plan->epoch());
        status = Status::Unavailable("node " + store.node_id + " went away as it made the plan");
      } else {
        master_.nodes_.NoteRouted(store.node, store.device, Rounded(items_[attempt.item].bytes));
      }
    }
    std::lock_guard lock(mu_);
    Item& item = items_[attempt.item];
    if (status.ok()) {
      v1::ReplicaPlan* replica = &item.plans.emplace_back();
      replica->set_node_id(store.node_id);
      replica->set_data_address(store.data_address);
      if (!routes_.contains(store.node_id)) routes_.emplace(store.node_id, store.route);
      *replica->mutable_plan() = std::move(*plan);
      return;
    }
    item.busy.erase(store.node);
    item.last_error = status;
    if (TryElsewhere(status)) Next(attempt.item, &retries_);
  }

  void EndRound() {
    std::vector<Attempt> retries;
    {
      std::lock_guard lock(mu_);
      retries.swap(retries_);
      if (!retries.empty()) ++rounds_;
      if (--rounds_ > 0 && retries.empty()) return;
    }
    if (!retries.empty()) return Dispatch(std::move(retries));
    Reply();
  }

  void Reply() {
    v1::OpenReply reply;
    reply.set_term(term_);
    for (Item& item : items_) {
      v1::OpenResult* result = reply.add_results();
      if (!item.status.ok()) {
        ToItem(item.status, result->mutable_status());
        continue;
      }
      master_.index_.EndPlanning(item.key, item.write_id);
      if (item.plans.empty()) {
        master_.index_.EndWrite(item.key, item.write_id);
        Status why = item.last_error.ok() ? Status::Unavailable("open of '" + item.key + "': no store took it")
                                          : item.last_error;
        ToItem(why, result->mutable_status());
        continue;
      }
      result->mutable_status()->set_code(0);
      result->set_write_id(item.write_id);
      for (v1::ReplicaPlan& plan : item.plans) *result->add_replicas() = std::move(plan);
    }
    for (auto& [node_id, route] : routes_) {
      v1::NodeRouteEntry* entry = reply.add_routes();
      entry->set_node_id(node_id);
      *entry->mutable_route() = std::move(route);
    }
    done_(std::move(reply));
  }

  // A plan made for a write that is gone: revoke it on its node.
  void RevokeOrphan(const StoreView& store, const std::string& key, uint32_t epoch) {
    Order order;
    order.node = store.node;
    order.key.set_key(key);
    order.key.set_epoch(epoch);
    SendOrders(
        master_.nodes_, term_, OrderKind::kRevoke, {std::move(order)},
        [](size_t, const Status&, wire::ObjectPlan*, SessionRef) {}, [] {});
  }

  ClusterMaster& master_;
  std::function<void(v1::OpenReply)> done_;
  const uint64_t term_;
  const std::shared_ptr<const std::vector<StoreView>> stores_;
  std::mutex mu_;
  std::vector<Item> items_;
  std::map<std::string, v1::NodeRoute> routes_;  // of the nodes that made plans: the reply's route table
  std::vector<Attempt> retries_;  // picked during a round, sent at its end
  size_t rounds_ = 0;             // rounds not ended yet
};

void ClusterMaster::Open(const v1::OpenRequest& request, std::function<void(v1::OpenReply)> done) {
  auto job = std::make_shared<OpenJob>(*this, std::move(done));
  job->Start(request);
}

void ClusterMaster::Finish(const v1::FinishRequest& request, bool commit, std::function<void(v1::AckReply)> done) {
  struct Job {
    std::mutex mu;
    std::vector<Status> results;       // per item: the first failure, or OK
    std::vector<uint32_t> succeeded;   // per item: orders that succeeded
    std::vector<uint32_t> ordered;     // per item: orders sent
    std::vector<std::pair<std::string, uint64_t>> writes;  // per item: key, write id (0: not started)
    std::vector<size_t> item_of;       // per order
  };
  auto job = std::make_shared<Job>();
  const size_t n = static_cast<size_t>(request.items_size());
  job->results.resize(n);
  job->succeeded.assign(n, 0);
  job->ordered.assign(n, 0);
  job->writes.resize(n);
  std::vector<Order> orders;
  std::vector<CopyRef> order_copy;
  for (size_t i = 0; i < n; ++i) {
    const v1::WriteRef& ref = request.items(static_cast<int>(i));
    Status checked = CheckWriteRef(ref);
    auto copies = checked.ok() ? index_.StartFinish(ref.key(), ref.write_id(), commit)
                               : Result<std::vector<CopyRef>>(checked);
    if (!copies.ok()) {
      job->results[i] = copies.status();
      continue;
    }
    job->writes[i] = {ref.key(), ref.write_id()};
    if (copies->empty() && commit) {
      job->results[i] = Status::NotFound("commit of '" + ref.key() + "': nothing left to commit (its plans were "
                                         "reclaimed on their nodes, or the nodes died)");
    }
    for (const CopyRef& copy : *copies) {
      Order order;
      order.node = copy.node;
      order.key.set_key(ref.key());
      order.key.set_epoch(copy.epoch);
      order.key.set_published(ref.published());
      orders.push_back(std::move(order));
      order_copy.push_back(copy);
      job->item_of.push_back(i);
      ++job->ordered[i];
    }
  }
  const uint64_t my_term = term();
  SendOrders(
      nodes_, my_term, commit ? OrderKind::kCommit : OrderKind::kRevoke, std::move(orders),
      [this, job, order_copy, commit](size_t k, const Status& status, wire::ObjectPlan*, SessionRef session) {
        const size_t i = job->item_of[k];
        // A revoke the node no longer knows of (reclaimed already) is done.
        bool ok = status.ok() || (!commit && status.code() == Code::kNotFound);
        if (ok && commit) {
          ok = nodes_.WithLiveSession(session, [&] {
            index_.AddCommitted(job->writes[i].first, job->writes[i].second, order_copy[k]);
          });
        }
        std::lock_guard lock(job->mu);
        if (ok) {
          ++job->succeeded[i];
        } else if (job->results[i].ok()) {
          job->results[i] = status.ok() ? Status::Unavailable("the node went away as it committed") : status;
        }
      },
      [this, job, commit, my_term, done = std::move(done)] {
        v1::AckReply reply;
        reply.set_term(my_term);
        for (size_t i = 0; i < job->results.size(); ++i) {
          if (job->writes[i].second != 0) index_.EndWrite(job->writes[i].first, job->writes[i].second);
          Status result = job->results[i];
          // A commit stands once one copy is READY: replicas are best effort
          // (get_location says how many exist).
          if (commit && job->succeeded[i] > 0) result = Status::OK();
          ToItem(result, reply.add_results());
        }
        done(std::move(reply));
      });
}

void ClusterMaster::Remove(const v1::KeysRequest& request, std::function<void(v1::AckReply)> done) {
  struct Job {
    std::mutex mu;
    std::vector<Status> results;
    std::vector<std::vector<CopyRef>> removed;  // per item
    std::vector<bool> started;
    std::vector<size_t> item_of;                // per order
    std::vector<CopyRef> copy_of;               // per order
  };
  auto job = std::make_shared<Job>();
  const size_t n = static_cast<size_t>(request.keys_size());
  job->results.resize(n);
  job->removed.resize(n);
  job->started.assign(n, false);
  std::vector<Order> orders;
  for (size_t i = 0; i < n; ++i) {
    const std::string& key = request.keys(static_cast<int>(i));
    Status checked = CheckKey(key, "remove");
    auto copies = checked.ok() ? index_.StartRemove(key) : Result<std::vector<CopyRef>>(checked);
    if (!copies.ok()) {
      job->results[i] = copies.status();
      continue;
    }
    job->started[i] = true;
    for (const CopyRef& copy : *copies) {
      Order order;
      order.node = copy.node;
      order.key.set_key(key);
      order.key.set_epoch(copy.epoch);
      orders.push_back(std::move(order));
      job->item_of.push_back(i);
      job->copy_of.push_back(copy);
    }
  }
  const uint64_t my_term = term();
  SendOrders(
      nodes_, my_term, OrderKind::kRemove, std::move(orders),
      [job](size_t k, const Status& status, wire::ObjectPlan*, SessionRef) {
        const size_t i = job->item_of[k];
        std::lock_guard lock(job->mu);
        // Gone from the node either way (removed now, or evicted before).
        if (status.ok() || status.code() == Code::kNotFound) {
          job->removed[i].push_back(job->copy_of[k]);
        } else if (job->results[i].ok()) {
          job->results[i] = status;
        }
      },
      [this, job, request_keys = std::vector<std::string>(request.keys().begin(), request.keys().end()), my_term,
       done = std::move(done)] {
        v1::AckReply reply;
        reply.set_term(my_term);
        for (size_t i = 0; i < job->results.size(); ++i) {
          if (job->started[i]) index_.EndRemove(request_keys[i], job->removed[i]);
          ToItem(job->results[i], reply.add_results());
        }
        done(std::move(reply));
      });
}

}  // namespace nanokv::master
