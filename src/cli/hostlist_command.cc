#include "cli/hostlist_command.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "util/hostlist.h"
#include "util/idset.h"

namespace corral {
namespace {

constexpr const char* kListHelp = "hostlists like node[01-04],login1; '-' or none reads hosts from stdin";

struct OpArgs {
  std::vector<std::string> lists;
  std::string index;  // nth only
  std::string delimiter = "\\n";
  bool expand = false;
};

using Op = std::function<void(const OpArgs&)>;

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "corral hostlist: " << message << "\n";
  throw CLI::RuntimeError(2);
}

Hostlist parse_or_fail(std::string_view expr) {
  auto hl = Hostlist::parse(expr);
  if (!hl) fail(hl.message());
  return std::move(hl).value();
}

// Hosts on stdin are whitespace separated; each word may itself be a hostlist.
Hostlist read_stdin() {
  Hostlist out;
  std::string word;
  while (std::cin >> word) out.append(parse_or_fail(word));
  return out;
}

Hostlist load(const std::string& arg) { return arg == "-" ? read_stdin() : parse_or_fail(arg); }

Hostlist concat(const std::vector<std::string>& lists) {
  if (lists.empty()) return read_stdin();
  Hostlist out;
  for (const std::string& l : lists) out.append(load(l));
  return out;
}

std::vector<Hostlist> load_at_least_two(const std::vector<std::string>& lists, const char* op) {
  if (lists.size() < 2) fail(std::string(op) + " needs at least two hostlists");
  std::vector<Hostlist> out;
  for (const std::string& l : lists) out.push_back(load(l));
  return out;
}

// "\n" and "\t" typed on the command line mean newline and tab.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'n' || s[i + 1] == 't')) {
      out += s[++i] == 'n' ? '\n' : '\t';
    } else {
      out += s[i];
    }
  }
  return out;
}

void print_expanded(const std::vector<std::string>& hosts, const OpArgs& a) {
  if (hosts.empty()) return;
  std::string delim = unescape(a.delimiter);
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (i > 0) std::cout << delim;
    std::cout << hosts[i];
  }
  std::cout << "\n";
}

void print(const Hostlist& hl, const OpArgs& a) {
  if (a.expand) {
    print_expanded(hl.hosts(), a);
  } else {
    std::cout << hl.encode() << "\n";
  }
}

bool is_integer(const std::string& s) {
  size_t start = !s.empty() && s[0] == '-' ? 1 : 0;
  return s.size() > start && s.find_first_not_of("0123456789", start) == std::string::npos;
}

// N is one index (negative counts from the end) or an idset of indices like 0,2-3.
void run_nth(const OpArgs& a) {
  Hostlist hl = concat(a.lists);
  std::vector<std::string> picked;
  if (is_integer(a.index)) {
    long n = 0;
    try {
      n = std::stol(a.index);
    } catch (const std::out_of_range&) {
      fail("index " + a.index + " is out of range");
    }
    auto host = hl.nth(n);
    if (!host) fail(host.message());
    picked.push_back(*host);
  } else {
    auto ids = IdSet::parse(a.index);
    if (!ids) fail(ids.message());
    for (uint32_t i : ids->to_vector()) {
      auto host = hl.nth(static_cast<long>(i));
      if (!host) fail(host.message());
      picked.push_back(*host);
    }
  }
  print_expanded(picked, a);
}

CLI::App* add_op(CLI::App& parent, const std::string& name, const std::string& help, Op op, bool list_output) {
  auto args = std::make_shared<OpArgs>();
  CLI::App* sub = parent.add_subcommand(name, help);
  if (name == "nth") {
    sub->add_option("N", args->index, "index (0-based, negative from the end) or idset like 0,2-3")->required();
  }
  sub->add_option("LIST", args->lists, kListHelp);
  if (list_output) {
    sub->add_flag("-e,--expand", args->expand, "print every host instead of the ranged form");
  }
  if (list_output || name == "expand" || name == "nth") {
    sub->add_option("-d,--delimiter", args->delimiter, "separator between expanded hosts (default: newline)");
  }
  sub->callback([args, op] { op(*args); });
  return sub;
}

}  // namespace

void add_hostlist_command(CLI::App& app) {
  CLI::App* hl =
      app.add_subcommand("hostlist", "Expand, compress, count and combine hostlists (Slurm / Flux RFC 29 syntax)");
  hl->require_subcommand(1);

  add_op(
      *hl, "expand", "Print every host of LIST..., one per line or joined by -d SEP",
      [](const OpArgs& a) { print_expanded(concat(a.lists).hosts(), a); }, false);
  add_op(
      *hl, "compress", "Print LIST... in ranged form, keeping host order and duplicates",
      [](const OpArgs& a) { std::cout << concat(a.lists).encode() << "\n"; }, false);
  add_op(
      *hl, "count", "Print the number of hosts in LIST... (duplicates count)",
      [](const OpArgs& a) { std::cout << concat(a.lists).count() << "\n"; }, false);
  add_op(*hl, "nth", "Print the host(s) at index N of LIST...", run_nth, false);
  add_op(
      *hl, "sort", "Print LIST... in natural order (n2 before n10), keeping duplicates",
      [](const OpArgs& a) { print(concat(a.lists).sorted(), a); }, true);
  add_op(
      *hl, "uniq", "Print LIST... sorted, without duplicates",
      [](const OpArgs& a) { print(concat(a.lists).uniq(), a); }, true);
  add_op(
      *hl, "union", "Print the hosts in any of the hostlists, sorted and unique",
      [](const OpArgs& a) { print(concat(a.lists).uniq(), a); }, true);
  add_op(
      *hl, "intersect", "Print the hosts present in every hostlist, sorted and unique",
      [](const OpArgs& a) {
        auto lists = load_at_least_two(a.lists, "intersect");
        Hostlist out = lists[0].uniq();
        for (size_t i = 1; i < lists.size(); ++i) out = out.intersect(lists[i]);
        print(out, a);
      },
      true);
  add_op(
      *hl, "minus", "Print the hosts of the first hostlist that are in none of the others",
      [](const OpArgs& a) {
        auto lists = load_at_least_two(a.lists, "minus");
        Hostlist others;
        for (size_t i = 1; i < lists.size(); ++i) others.append(lists[i]);
        print(lists[0].minus(others), a);
      },
      true);
}

}  // namespace corral
