#include "node/pmix/pmix_info.h"

#include <pmix.h>

#include <cstring>

namespace corral::node {

PmixInfoList::~PmixInfoList() {
  for (auto& item : items_) PMIX_INFO_DESTRUCT(&item);
}

pmix_info_t& PmixInfoList::next(const char* key) {
  pmix_info_t& item = items_.emplace_back();
  PMIX_INFO_CONSTRUCT(&item);
  PMIX_LOAD_KEY(item.key, key);
  return item;
}

void PmixInfoList::add_string(const char* key, const std::string& value) {
  PMIX_INFO_LOAD(&next(key), key, value.c_str(), PMIX_STRING);
}

void PmixInfoList::add_regex(const char* key, const char* regex) { PMIX_INFO_LOAD(&next(key), key, regex, PMIX_REGEX); }

void PmixInfoList::add_bool(const char* key, bool value) { PMIX_INFO_LOAD(&next(key), key, &value, PMIX_BOOL); }

void PmixInfoList::add_uint32(const char* key, uint32_t value) {
  PMIX_INFO_LOAD(&next(key), key, &value, PMIX_UINT32);
}

void PmixInfoList::add_uint16(const char* key, uint16_t value) {
  PMIX_INFO_LOAD(&next(key), key, &value, PMIX_UINT16);
}

void PmixInfoList::add_rank(const char* key, uint32_t rank) {
  pmix_rank_t r = rank;
  PMIX_INFO_LOAD(&next(key), key, &r, PMIX_PROC_RANK);
}

void PmixInfoList::add_array(const char* key, PmixInfoList entries) {
  pmix_data_array_t* array = nullptr;
  PMIX_DATA_ARRAY_CREATE(array, entries.size(), PMIX_INFO);
  // The entries move into the array bit for bit: it owns their values from here on.
  if (!entries.items_.empty())
    std::memcpy(array->array, entries.items_.data(), entries.items_.size() * sizeof(pmix_info_t));
  entries.items_.clear();
  pmix_info_t& item = next(key);
  item.value.type = PMIX_DATA_ARRAY;
  item.value.data.darray = array;
}

}  // namespace corral::node
