// The emulated API server's storage (what etcd is to a real one): objects by kind,
// namespace and name, one resourceVersion counter, a bounded history of changes that
// watches read from (a version older than the history is "too old", 410), finalizers and
// deletionTimestamp, garbage collection of owned objects, and a journal so the state
// survives a restart.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "api_error.h"
#include "crd_catalog.h"
#include "selectors.h"

namespace corral::emu::dws {

using ObjectPtr = std::shared_ptr<const nlohmann::json>;

struct StoredEvent {
  uint64_t rv = 0;
  std::string type;  // ADDED, MODIFIED, DELETED
  const KindInfo* kind = nullptr;
  ObjectPtr obj;
  std::string text;  // obj serialized once, for the journal and every watch
};
using EventPtr = std::shared_ptr<const StoredEvent>;

// Which part of an object a write may change (a /status subresource write changes only
// status; a main-resource write of a kind with /status leaves status alone).
enum class Part { all, main, status };

class ObjectStore {
 public:
  ObjectStore(const CrdCatalog& catalog, std::string journal_path, size_t history);
  ~ObjectStore();
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // Replays the journal (when there is one) and rewrites it compacted.
  Status load();
  // Writes what the journal holds in memory to its file.
  void flush();

  ApiResult<ObjectPtr> get(const KindInfo& k, const std::string& ns, const std::string& name) const;

  struct ListPage {
    std::vector<ObjectPtr> items;
    uint64_t rv = 0;
    std::string next;  // the continue token; empty at the end
  };
  // `ns` empty: every namespace. `after`: the continue token of the previous page.
  ListPage list(const KindInfo& k, const std::string& ns, const Selector& sel, size_t limit,
                const std::string& after) const;

  // Stores a new object: fills uid, creationTimestamp, generation and resourceVersion.
  ApiResult<ObjectPtr> create(const KindInfo& k, const std::string& ns, nlohmann::json obj);
  // Changes an object: `fn` gets the current object and edits it (or returns an error),
  // outside the store's lock; when the object changed meanwhile, `fn` runs again on the new
  // one (so it must not have effects of its own). A resourceVersion `fn` leaves in metadata
  // must match (409 if not). An object being deleted whose last finalizer goes is removed.
  using Edit = std::function<std::optional<ApiError>(const nlohmann::json& old, nlohmann::json& obj)>;
  ApiResult<ObjectPtr> modify(const KindInfo& k, const std::string& ns, const std::string& name, Part part,
                              const Edit& fn);
  // DELETE: with finalizers, sets deletionTimestamp; without, removes the object.
  ApiResult<ObjectPtr> remove(const KindInfo& k, const std::string& ns, const std::string& name);

  // Watches. Events with rv > `since`, at most `max`, waiting until `deadline` for one of
  // kind `k` (a watch sleeps through changes to other kinds; the events it gets may still
  // include them, for it to skip and count past). On a timeout `since` moves to the
  // current version: nothing of kind `k` happened in between.
  enum class Wait { events, timeout, expired, cut };
  Wait wait_events(const KindInfo& k, uint64_t& since, std::chrono::steady_clock::time_point deadline,
                   uint64_t cut_seen, std::vector<EventPtr>& out, size_t max) const;
  uint64_t current_rv() const;
  // `obj` as JSON text: the text its change was stored with when that change is recent
  // (a write's reply is the object it just stored), else serialized now.
  std::string serialized(const ObjectPtr& obj) const;
  // A counter that `cut_watches` bumps: a watch that saw another value ends.
  uint64_t cut_generation() const;
  void cut_watches();

  // Called (with the store's lock held: keep it short) after every change.
  void on_change(std::function<void(const StoredEvent&)> fn);
  size_t object_count() const;

 private:
  using Objects = std::map<std::string, ObjectPtr>;  // "namespace/name" -> object
  ObjectPtr commit(const KindInfo& k, const std::string& type, nlohmann::json obj);
  static ApiResult<std::optional<nlohmann::json>> edit_outside_lock(const KindInfo& k, const std::string& name,
                                                                    Part part, const Edit& fn,
                                                                    const nlohmann::json& cur);
  void erase_locked(const KindInfo& k, const std::string& key, const ObjectPtr& obj);
  void collect_dependents(const std::string& owner_uid);
  void journal(const std::string& line);
  uint64_t kind_rv_locked(const KindInfo& k) const;
  static std::string key_of(const nlohmann::json& obj);

  const CrdCatalog& catalog_;
  std::string journal_path_;
  size_t history_max_;

  mutable std::mutex mu_;
  // One per kind, so a change wakes only the watches of its kind.
  mutable std::map<const KindInfo*, std::condition_variable> changed_;
  std::map<const KindInfo*, uint64_t> kind_rv_;  // the last change to each kind
  std::map<std::string, Objects> objects_;       // by plural
  // owner uid -> (plural, key) of the objects that name it in ownerReferences
  std::unordered_map<std::string, std::set<std::pair<std::string, std::string>>> dependents_;
  uint64_t rv_ = 1;
  uint64_t oldest_rv_ = 1;  // events before this one have left the history
  uint64_t cut_gen_ = 0;
  std::deque<EventPtr> history_;
  std::vector<std::function<void(const StoredEvent&)>> listeners_;
  std::FILE* journal_ = nullptr;
  bool replaying_ = false;
};

// Timestamps as Kubernetes writes them.
std::string rfc3339_now();
std::string micro_time_now();

}  // namespace corral::emu::dws
