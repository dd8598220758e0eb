#include "object_store.h"

#include <ctime>
#include <fstream>
#include <random>

#include <fmt/format.h>

namespace corral::emu::dws {

using nlohmann::json;

namespace {

std::string uuid4() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t a = rng(), b = rng();
  a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;
  b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", a >> 32, (a >> 16) & 0xffff, a & 0xffff, b >> 48,
                     b & 0xffffffffffffULL);
}

std::string format_time(bool micro) {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  if (!micro) return std::string(buf) + "Z";
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
  return fmt::format("{}.{:06d}Z", buf, us);
}

const json& meta(const json& obj) { return obj.at("metadata"); }

bool has_finalizers(const json& obj) {
  auto m = obj.find("metadata");
  if (m == obj.end()) return false;
  auto f = m->find("finalizers");
  return f != m->end() && f->is_array() && !f->empty();
}

bool being_deleted(const json& obj) { return meta(obj).contains("deletionTimestamp"); }

// Equal in everything but metadata.resourceVersion ("did anything change"), without copying.
bool same_but_version(const json& a, const json& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, v] : a.items()) {
    auto o = b.find(k);
    if (o == b.end()) return false;
    if (k != "metadata" || !v.is_object() || !o->is_object()) {
      if (v != *o) return false;
      continue;
    }
    size_t na = v.size() - v.count("resourceVersion"), nb = o->size() - o->count("resourceVersion");
    if (na != nb) return false;
    for (const auto& [mk, mv] : v.items()) {
      if (mk == "resourceVersion") continue;
      auto om = o->find(mk);
      if (om == o->end() || mv != *om) return false;
    }
  }
  return true;
}

// A journal line: {"plural":..,"rv":..,"put":OBJECT} or {"plural":..,"rv":..,"del":KEY},
// built around the object's text instead of copying the object into another document.
std::string journal_line(const std::string& plural, uint64_t rv, const char* op, const std::string& value) {
  return fmt::format(R"({{"plural":{},"rv":{},"{}":{}}})", json(plural).dump(), rv, op, value) + "\n";
}

bool spec_changed(const json& a, const json& b) {
  for (const auto& [k, v] : b.items())
    if (k != "metadata" && k != "status" && (!a.contains(k) || a[k] != v)) return true;
  for (const auto& [k, v] : a.items())
    if (k != "metadata" && k != "status" && !b.contains(k)) return true;
  return false;
}

}  // namespace

std::string rfc3339_now() { return format_time(false); }
std::string micro_time_now() { return format_time(true); }

ObjectStore::ObjectStore(const CrdCatalog& catalog, std::string journal_path, size_t history)
    : catalog_(catalog), journal_path_(std::move(journal_path)), history_max_(history) {}

ObjectStore::~ObjectStore() {
  flush();
  if (journal_) std::fclose(journal_);
}

std::string ObjectStore::key_of(const json& obj) {
  const auto& m = meta(obj);
  return m.value("namespace", "") + "/" + m.value("name", "");
}

Status ObjectStore::load() {
  std::lock_guard lk(mu_);
  if (journal_path_.empty()) return {};
  std::ifstream in(journal_path_);
  std::string line;
  replaying_ = true;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;  // a torn last line after a crash
    const KindInfo* k = catalog_.by_plural(j.value("plural", ""));
    if (!k) continue;
    uint64_t rv = j.value("rv", uint64_t{0});
    if (rv >= rv_) rv_ = rv + 1;
    if (j.contains("put")) {
      std::string key = key_of(j["put"]);
      objects_[k->plural][key] = std::make_shared<const json>(std::move(j["put"]));
    } else if (j.contains("del")) {
      objects_[k->plural].erase(j.value("del", ""));
    }
  }
  replaying_ = false;
  oldest_rv_ = rv_;
  for (const auto& [plural, objs] : objects_)
    for (const auto& [key, obj] : objs)
      if (meta(*obj).contains("ownerReferences"))
        for (const auto& o : meta(*obj)["ownerReferences"]) dependents_[o.value("uid", "")].insert({plural, key});
  // Compact: one line per live object.
  std::string tmp = journal_path_ + ".new";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return io_error("cannot write " + tmp);
  for (const auto& [plural, objs] : objects_)
    for (const auto& [key, obj] : objs) {
      std::string l = journal_line(plural, rv_ - 1, "put", obj->dump());
      std::fwrite(l.data(), 1, l.size(), f);
    }
  std::fclose(f);
  if (std::rename(tmp.c_str(), journal_path_.c_str()) != 0) return io_error("cannot replace " + journal_path_);
  journal_ = std::fopen(journal_path_.c_str(), "a");
  if (!journal_) return io_error("cannot append to " + journal_path_);
  return {};
}

void ObjectStore::flush() {
  std::lock_guard lk(mu_);
  if (journal_) std::fflush(journal_);
}

void ObjectStore::journal(const std::string& line) {
  if (!journal_ || replaying_) return;
  std::fwrite(line.data(), 1, line.size(), journal_);
  std::fflush(journal_);  // a killed emulator keeps what it acknowledged
}

std::string ObjectStore::serialized(const ObjectPtr& obj) const {
  constexpr size_t kRecent = 64;  // a reply's change is among the last few unless the store is busy
  {
    std::lock_guard lk(mu_);
    size_t looked = 0;
    for (auto it = history_.rbegin(); it != history_.rend() && looked < kRecent; ++it, ++looked)
      if ((*it)->obj == obj) return (*it)->text;
  }
  return obj->dump();
}

ApiResult<ObjectPtr> ObjectStore::get(const KindInfo& k, const std::string& ns, const std::string& name) const {
  std::lock_guard lk(mu_);
  auto kit = objects_.find(k.plural);
  if (kit != objects_.end()) {
    auto it = kit->second.find(ns + "/" + name);
    if (it != kit->second.end()) return it->second;
  }
  return not_found_error(k, name);
}

ObjectStore::ListPage ObjectStore::list(const KindInfo& k, const std::string& ns, const Selector& sel, size_t limit,
                                        const std::string& after) const {
  std::lock_guard lk(mu_);
  ListPage page;
  page.rv = rv_ - 1;
  auto kit = objects_.find(k.plural);
  if (kit == objects_.end()) return page;
  const auto& objs = kit->second;
  auto it = after.empty() ? (ns.empty() ? objs.begin() : objs.lower_bound(ns + "/")) : objs.upper_bound(after);
  for (; it != objs.end(); ++it) {
    if (!ns.empty() && it->first.compare(0, ns.size() + 1, ns + "/") != 0) break;
    if (!sel.matches(*it->second)) continue;
    if (limit && page.items.size() == limit) {
      page.next = std::prev(it)->first;
      break;
    }
    page.items.push_back(it->second);
  }
  return page;
}

ObjectPtr ObjectStore::commit(const KindInfo& k, const std::string& type, json obj) {
  uint64_t rv = rv_++;
  obj["metadata"]["resourceVersion"] = std::to_string(rv);
  auto ptr = std::make_shared<const json>(std::move(obj));
  std::string key = key_of(*ptr);
  auto ev = std::make_shared<const StoredEvent>(StoredEvent{rv, type, &k, ptr, ptr->dump()});
  if (type == "DELETED") {
    objects_[k.plural].erase(key);
    journal(journal_line(k.plural, rv, "del", json(key).dump()));
  } else {
    objects_[k.plural][key] = ptr;
    journal(journal_line(k.plural, rv, "put", ev->text));
  }
  history_.push_back(ev);
  while (history_.size() > history_max_) {
    history_.pop_front();
    oldest_rv_ = history_.front()->rv;
  }
  for (const auto& fn : listeners_) fn(*ev);
  kind_rv_[&k] = rv;
  changed_[&k].notify_all();
  return ptr;
}

ApiResult<ObjectPtr> ObjectStore::create(const KindInfo& k, const std::string& ns, json obj) {
  std::lock_guard lk(mu_);
  auto& m = obj["metadata"];
  std::string name = m.value("name", "");
  if (k.namespaced) m["namespace"] = ns;
  if (objects_[k.plural].count(ns + "/" + name)) return already_exists_error(k, name);
  m["uid"] = uuid4();
  m["creationTimestamp"] = rfc3339_now();
  m["generation"] = 1;
  m.erase("deletionTimestamp");
  m.erase("resourceVersion");
  if (m.contains("ownerReferences"))
    for (const auto& o : m["ownerReferences"]) dependents_[o.value("uid", "")].insert({k.plural, ns + "/" + name});
  return commit(k, "ADDED", std::move(obj));
}

// As an API server's GuaranteedUpdate: the edit, the checks and the copy they need run
// outside the store's lock on the object as it was; the result is stored only if the
// object did not change meanwhile, else all of it runs again on the new one. The lock is
// held for the commit alone, so writers on both cores and the NNF driver do not queue
// behind each other's schema checks.
ApiResult<ObjectPtr> ObjectStore::modify(const KindInfo& k, const std::string& ns, const std::string& name, Part part,
                                         const Edit& fn) {
  constexpr int kTries = 32;
  const std::string key = ns + "/" + name;
  for (int attempt = 1;; ++attempt) {
    ObjectPtr seen;
    {
      std::lock_guard lk(mu_);
      auto& objs = objects_[k.plural];
      auto it = objs.find(key);
      if (it == objs.end()) return not_found_error(k, name);
      seen = it->second;
    }
    auto edited = edit_outside_lock(k, name, part, fn, *seen);
    if (!edited) return edited.error();
    std::lock_guard lk(mu_);
    auto& objs = objects_[k.plural];
    auto it = objs.find(key);
    if (it == objs.end()) return not_found_error(k, name);
    if (it->second != seen) {
      if (attempt < kTries) continue;
      return conflict_error(k, name);
    }
    if (!*edited) return it->second;  // a no-op write keeps its version
    json& obj = **edited;
    if (being_deleted(obj) && !has_finalizers(obj)) {
      ObjectPtr last = it->second;
      erase_locked(k, key, std::make_shared<const json>(std::move(obj)));
      return last;
    }
    return commit(k, "MODIFIED", std::move(obj));
  }
}

// The object `fn` makes of `cur`, checked; nullopt when it is `cur` again.
ApiResult<std::optional<json>> ObjectStore::edit_outside_lock(const KindInfo& k, const std::string& name, Part part,
                                                              const Edit& fn, const json& cur) {
  json obj = cur;
  if (auto err = fn(cur, obj)) return *err;
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object())
    return bad_request("the object has no metadata");
  auto& m = obj["metadata"];
  const auto& cm = meta(cur);
  if (m.contains("resourceVersion") && m["resourceVersion"] != cm["resourceVersion"]) return conflict_error(k, name);
  if (m.value("name", name) != name) return bad_request("the name of the object does not match the name on the URL");
  for (const char* f : {"uid", "creationTimestamp", "name", "namespace", "generation", "deletionTimestamp"}) {
    if (cm.contains(f))
      m[f] = cm[f];
    else
      m.erase(f);
  }
  if (being_deleted(cur) && m.contains("finalizers")) {
    for (const auto& f : m["finalizers"]) {
      bool had = cm.contains("finalizers") &&
                 std::find(cm["finalizers"].begin(), cm["finalizers"].end(), f) != cm["finalizers"].end();
      if (!had)
        return invalid_error(
            k, name,
            {FieldError{
                "metadata.finalizers", "FieldValueForbidden",
                "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers " +
                    json::array({f}).dump()}});
    }
  }
  if (part == Part::main && k.status_subresource) {
    if (cur.contains("status"))
      obj["status"] = cur["status"];
    else
      obj.erase("status");
  } else if (part == Part::status) {
    json s = obj.contains("status") ? obj["status"] : json();
    json kept = cur;
    kept["metadata"] = m;
    if (s.is_null())
      kept.erase("status");
    else
      kept["status"] = std::move(s);
    obj = std::move(kept);
  }
  if (same_but_version(obj, cur)) return std::optional<json>();
  if (spec_changed(cur, obj)) obj["metadata"]["generation"] = cm.value("generation", 1) + 1;
  return std::optional<json>(std::move(obj));
}

ApiResult<ObjectPtr> ObjectStore::remove(const KindInfo& k, const std::string& ns, const std::string& name) {
  std::lock_guard lk(mu_);
  auto& objs = objects_[k.plural];
  auto it = objs.find(ns + "/" + name);
  if (it == objs.end()) return not_found_error(k, name);
  if (has_finalizers(*it->second)) {
    if (being_deleted(*it->second)) return it->second;
    json obj = *it->second;
    obj["metadata"]["deletionTimestamp"] = rfc3339_now();
    obj["metadata"]["deletionGracePeriodSeconds"] = 0;
    return commit(k, "MODIFIED", std::move(obj));
  }
  ObjectPtr obj = it->second;
  erase_locked(k, ns + "/" + name, obj);
  return obj;
}

void ObjectStore::erase_locked(const KindInfo& k, const std::string& key, const ObjectPtr& obj) {
  std::string uid = meta(*obj).value("uid", "");
  if (meta(*obj).contains("ownerReferences"))
    for (const auto& o : meta(*obj)["ownerReferences"]) {
      auto d = dependents_.find(o.value("uid", ""));
      if (d != dependents_.end()) {
        d->second.erase({k.plural, key});
        if (d->second.empty()) dependents_.erase(d);
      }
    }
  json last = *obj;
  commit(k, "DELETED", std::move(last));
  collect_dependents(uid);
}

// Background garbage collection: objects owned by a removed object are deleted too
// (through their own finalizers, when they have some).
void ObjectStore::collect_dependents(const std::string& owner_uid) {
  auto d = dependents_.find(owner_uid);
  if (d == dependents_.end()) return;
  auto owned = std::move(d->second);
  dependents_.erase(d);
  for (const auto& [plural, key] : owned) {
    const KindInfo* k = catalog_.by_plural(plural);
    auto it = objects_[plural].find(key);
    if (!k || it == objects_[plural].end()) continue;
    if (has_finalizers(*it->second)) {
      if (being_deleted(*it->second)) continue;
      json obj = *it->second;
      obj["metadata"]["deletionTimestamp"] = rfc3339_now();
      commit(*k, "MODIFIED", std::move(obj));
    } else {
      ObjectPtr obj = it->second;
      erase_locked(*k, key, obj);
    }
  }
}

uint64_t ObjectStore::kind_rv_locked(const KindInfo& k) const {
  auto it = kind_rv_.find(&k);
  return it == kind_rv_.end() ? 0 : it->second;
}

ObjectStore::Wait ObjectStore::wait_events(const KindInfo& k, uint64_t& since,
                                           std::chrono::steady_clock::time_point deadline, uint64_t cut_seen,
                                           std::vector<EventPtr>& out, size_t max) const {
  std::unique_lock lk(mu_);
  auto& changed = changed_[&k];
  for (;;) {
    if (cut_gen_ != cut_seen) return Wait::cut;
    if (since + 1 < oldest_rv_) return Wait::expired;
    // Only a change of this kind wakes the watch; then it reads everything since, so that
    // its version moves past the other kinds' changes too.
    if (kind_rv_locked(k) > since) {
      // History is ordered by rv: find the first event after `since`.
      auto it = std::lower_bound(history_.begin(), history_.end(), since + 1,
                                 [](const EventPtr& e, uint64_t rv) { return e->rv < rv; });
      for (; it != history_.end() && out.size() < max; ++it) out.push_back(*it);
      if (!out.empty()) return Wait::events;
    }
    if (changed.wait_until(lk, deadline) == std::cv_status::timeout && kind_rv_locked(k) <= since &&
        cut_gen_ == cut_seen && since + 1 >= oldest_rv_) {
      since = std::max(since, rv_ - 1);
      return Wait::timeout;
    }
  }
}

uint64_t ObjectStore::current_rv() const {
  std::lock_guard lk(mu_);
  return rv_ - 1;
}

uint64_t ObjectStore::cut_generation() const {
  std::lock_guard lk(mu_);
  return cut_gen_;
}

void ObjectStore::cut_watches() {
  std::lock_guard lk(mu_);
  ++cut_gen_;
  for (auto& [kind, cv] : changed_) cv.notify_all();
}

void ObjectStore::on_change(std::function<void(const StoredEvent&)> fn) {
  std::lock_guard lk(mu_);
  listeners_.push_back(std::move(fn));
}

size_t ObjectStore::object_count() const {
  std::lock_guard lk(mu_);
  size_t n = 0;
  for (const auto& [p, objs] : objects_) n += objs.size();
  return n;
}

}  // namespace corral::emu::dws
