// An owned array of PMIx info entries (key, typed value) for the library's calls: built
// with typed adders, freed with the library's own destructor, nested as data arrays.
#pragma once

#include <pmix_common.h>

#include <cstdint>
#include <string>
#include <vector>

namespace corral::node {

class PmixInfoList {
 public:
  PmixInfoList() = default;
  ~PmixInfoList();
  PmixInfoList(PmixInfoList&& other) noexcept : items_(std::move(other.items_)) { other.items_.clear(); }
  PmixInfoList& operator=(PmixInfoList&&) = delete;
  PmixInfoList(const PmixInfoList&) = delete;
  PmixInfoList& operator=(const PmixInfoList&) = delete;

  void add_string(const char* key, const std::string& value);
  // `regex` as PMIx_generate_regex/_ppn made it: a string, or a compressed blob whose
  // length only the library knows, so it is passed as the library's own pointer.
  void add_regex(const char* key, const char* regex);
  void add_bool(const char* key, bool value);
  void add_uint32(const char* key, uint32_t value);
  void add_uint16(const char* key, uint16_t value);
  void add_rank(const char* key, uint32_t rank);
  // `entries` becomes a PMIX_DATA_ARRAY value (e.g. PMIX_PROC_DATA), owned by this list.
  void add_array(const char* key, PmixInfoList entries);

  pmix_info_t* data() { return items_.empty() ? nullptr : items_.data(); }
  std::size_t size() const { return items_.size(); }

 private:
  pmix_info_t& next(const char* key);
  std::vector<pmix_info_t> items_;
};

}  // namespace corral::node
