#include "selectors.h"

#include <algorithm>
#include <cctype>

namespace corral::emu::dws {
namespace {

std::string trim(std::string s) {
  auto sp = [](unsigned char c) { return std::isspace(c); };
  while (!s.empty() && sp(s.back())) s.pop_back();
  size_t i = 0;
  while (i < s.size() && sp(s[i])) ++i;
  return s.substr(i);
}

// Splits at commas outside parentheses.
std::vector<std::string> split_terms(const std::string& s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty() || !out.empty()) out.push_back(trim(cur));
  return out;
}

const nlohmann::json* label_of(const nlohmann::json& obj, const std::string& key) {
  auto m = obj.find("metadata");
  if (m == obj.end()) return nullptr;
  auto l = m->find("labels");
  if (l == m->end() || !l->is_object()) return nullptr;
  auto v = l->find(key);
  return v == l->end() ? nullptr : &*v;
}

std::string field_of(const nlohmann::json& obj, const std::string& key) {
  const auto& m = obj.at("metadata");
  if (key == "metadata.name") return m.value("name", "");
  return m.value("namespace", "");
}

}  // namespace

Result<Selector> Selector::parse(const std::string& labels, const std::string& fields) {
  Selector s;
  if (labels.size() > 4096 || fields.size() > 4096) return invalid("selector too long");
  for (const auto& t : split_terms(labels)) {
    if (t.empty()) return invalid("unable to parse requirement: found '', expected: identifier");
    Term term;
    size_t sp = t.find(' ');
    if (t[0] == '!') {
      term.op = Term::Op::absent;
      term.key = trim(t.substr(1));
    } else if (sp != std::string::npos &&
               (t.find(" in ") != std::string::npos || t.find(" notin ") != std::string::npos)) {
      term.key = trim(t.substr(0, sp));
      std::string rest = trim(t.substr(sp));
      term.op = rest.rfind("notin", 0) == 0 ? Term::Op::notin : Term::Op::in;
      auto open = rest.find('('), close = rest.rfind(')');
      if (open == std::string::npos || close == std::string::npos || close < open)
        return invalid("unable to parse requirement: found '" + rest + "', expected: '('");
      for (const auto& v : split_terms(rest.substr(open + 1, close - open - 1))) term.values.push_back(v);
    } else if (auto ne = t.find("!="); ne != std::string::npos) {
      term.op = Term::Op::ne;
      term.key = trim(t.substr(0, ne));
      term.values = {trim(t.substr(ne + 2))};
    } else if (auto eq = t.find('='); eq != std::string::npos) {
      term.op = Term::Op::eq;
      term.key = trim(t.substr(0, eq));
      size_t v = t.compare(eq, 2, "==") == 0 ? eq + 2 : eq + 1;
      term.values = {trim(t.substr(v))};
    } else {
      term.op = Term::Op::exists;
      term.key = t;
    }
    if (term.key.empty()) return invalid("unable to parse requirement: '" + t + "'");
    s.terms_.push_back(std::move(term));
  }
  for (const auto& t : split_terms(fields)) {
    Term term;
    term.field = true;
    auto ne = t.find("!=");
    auto eq = t.find('=');
    if (eq == std::string::npos) return invalid("invalid selector: '" + t + "'; can't understand '" + t + "'");
    term.op = ne != std::string::npos ? Term::Op::ne : Term::Op::eq;
    term.key = trim(t.substr(0, ne != std::string::npos ? ne : eq));
    size_t v = ne != std::string::npos ? ne + 2 : (t.compare(eq, 2, "==") == 0 ? eq + 2 : eq + 1);
    term.values = {trim(t.substr(v))};
    if (term.key != "metadata.name" && term.key != "metadata.namespace")
      return invalid("field label not supported: " + term.key);
    s.terms_.push_back(std::move(term));
  }
  return s;
}

bool Selector::matches(const nlohmann::json& obj) const {
  for (const auto& t : terms_) {
    std::string have;
    bool present;
    if (t.field) {
      have = field_of(obj, t.key);
      present = true;
    } else {
      const auto* l = label_of(obj, t.key);
      present = l != nullptr && l->is_string();
      if (present) have = l->get<std::string>();
    }
    bool in = present && std::find(t.values.begin(), t.values.end(), have) != t.values.end();
    switch (t.op) {
      case Term::Op::eq:
      case Term::Op::in:
        if (!in) return false;
        break;
      case Term::Op::ne:
      case Term::Op::notin:
        if (in) return false;
        break;
      case Term::Op::exists:
        if (!present) return false;
        break;
      case Term::Op::absent:
        if (present) return false;
        break;
    }
  }
  return true;
}

}  // namespace corral::emu::dws
