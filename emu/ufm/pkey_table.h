// What UFM keeps of partition keys: each key's name, flags and member GUIDs with their
// membership, and the checks UFM's REST interface makes on what it is sent. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace corral::emu::ufm {

// An answer: HTTP status and body.
struct Reply {
  int status = 200;
  nlohmann::json body = nlohmann::json::object();
};

class PkeyTable {
 public:
  // POST /ufmRest/resources/pkeys/add: a key without members.
  Reply create(const nlohmann::json& req);
  // POST /ufmRest/resources/pkeys: adds GUIDs (creating the key).
  Reply add_guids(const nlohmann::json& req);
  // POST /ufmRest/actions/remove_guids_from_pkey.
  Reply remove_guids(const nlohmann::json& req);
  // DELETE /ufmRest/resources/pkeys/KEY.
  Reply remove(const std::string& key);
  // GET /ufmRest/resources/pkeys[/KEY][?guids_data=true]: {} for an unknown key.
  Reply get(const std::string& key, bool guids_data) const;
  size_t size() const;

 private:
  struct Member {
    std::string membership = "full";
    bool index0 = false;
  };
  struct Pkey {
    std::string name;
    bool ip_over_ib = true;
    std::map<std::string, Member> guids;
  };
  nlohmann::json view(uint16_t key, const Pkey& p, bool guids_data) const;

  mutable std::mutex mu_;
  std::map<uint16_t, Pkey> pkeys_;
};

// "0x12" -> 0x12 when it is a key UFM takes ("0x0"-"0x7fff" exclusive); else nullopt.
std::optional<uint16_t> parse_ufm_pkey(const nlohmann::json& v);
// A GUID as UFM takes it (16-20 characters, hex, "0x" allowed) -> 16 lower-case digits.
std::optional<std::string> parse_ufm_guid(const nlohmann::json& v);

}  // namespace corral::emu::ufm
