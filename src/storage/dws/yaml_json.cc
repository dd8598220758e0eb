#include "storage/dws/yaml_json.h"

#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

namespace corral::storage::dws {
namespace {

using nlohmann::json;

// YAML 1.2 core schema for plain scalars (what Kubernetes' sigs.k8s.io/yaml does).
json plain_scalar(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  char* end = nullptr;
  errno = 0;
  long long i = std::strtoll(s.c_str(), &end, 10);
  if (end && *end == '\0' && errno == 0) return i;
  errno = 0;
  double d = std::strtod(s.c_str(), &end);
  if (end && *end == '\0' && errno == 0 && s.find_first_of("0123456789") != std::string::npos) return d;
  return s;
}

json to_json(const YAML::Node& n, int depth) {
  if (depth > 64) throw YAML::Exception(n.Mark(), "nested deeper than 64 levels");
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return n.Tag() == "?" ? plain_scalar(n.Scalar()) : json(n.Scalar());
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(to_json(e, depth + 1));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = to_json(kv.second, depth + 1);
      return o;
    }
  }
  return nullptr;
}

}  // namespace

Result<std::vector<json>> yaml_documents(const std::string& text) {
  try {
    std::vector<json> out;
    for (const auto& doc : YAML::LoadAll(text)) {
      json j = to_json(doc, 0);
      if (!j.is_null()) out.push_back(std::move(j));
    }
    return out;
  } catch (const YAML::Exception& e) {
    return invalid(std::string("not valid YAML: ") + e.what());
  }
}

Result<std::vector<json>> yaml_file_documents(const std::string& path) {
  std::ifstream in(path);
  if (!in) return io_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto docs = yaml_documents(ss.str());
  if (!docs) return invalid(path + ": " + docs.error().message);
  return docs;
}

}  // namespace corral::storage::dws
