#include "pmi_wire_client.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace corral::pmi_client {

namespace {

// A reply longer than this is not one of corral's: the server's own line limit is 4 KiB
// and a PMI-2 value 1 KiB.
constexpr std::size_t kMaxReply = 64 * 1024;

bool parse_int(std::string_view text, int& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

void add_pair(Fields& out, std::string_view token) {
  auto eq = token.find('=');
  if (eq == std::string_view::npos) {
    if (!out.empty()) {
      out.back().second += ' ';
      out.back().second += token;
    }
    return;
  }
  out.emplace_back(std::string(token.substr(0, eq)), std::string(token.substr(eq + 1)));
}

}  // namespace

const std::string* field(const Fields& fields, std::string_view key) {
  for (const auto& [k, v] : fields)
    if (k == key) return &v;
  return nullptr;
}

int int_field(const Fields& fields, std::string_view key, int fallback) {
  const std::string* v = field(fields, key);
  int out = fallback;
  return v && parse_int(*v, out) ? out : fallback;
}

Fields parse_v1(std::string_view line) {
  Fields out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\n' || line[i] == '\r')) ++i;
    std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\n' && line[i] != '\r') ++i;
    if (i > start) add_pair(out, line.substr(start, i - start));
  }
  return out;
}

Fields parse_v2(std::string_view message) {
  Fields out;
  std::size_t i = 0;
  while (i < message.size()) {
    std::size_t end = message.find(';', i);
    if (end == std::string_view::npos) end = message.size();
    std::string_view token = message.substr(i, end - i);
    auto eq = token.find('=');
    if (eq != std::string_view::npos)
      out.emplace_back(std::string(token.substr(0, eq)), std::string(token.substr(eq + 1)));
    i = end + 1;
  }
  return out;
}

std::optional<TaskEnv> read_task_env(std::string& error) {
  TaskEnv env;
  const char* fd = std::getenv("PMI_FD");
  if (fd == nullptr) return env;
  const char* rank = std::getenv("PMI_RANK");
  const char* size = std::getenv("PMI_SIZE");
  if (!parse_int(fd, env.fd) || env.fd < 0) {
    error = std::string("PMI_FD='") + fd + "' is not a file descriptor";
    return std::nullopt;
  }
  if (!rank || !size || !parse_int(rank, env.rank) || !parse_int(size, env.size) || env.size < 1 || env.rank < 0 ||
      env.rank >= env.size) {
    error = "PMI_FD is set but PMI_RANK and PMI_SIZE do not give a rank below a size";
    return std::nullopt;
  }
  return env;
}

bool WireClient::send(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool WireClient::fill() {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    in_.append(buf, static_cast<std::size_t>(n));
    return in_.size() <= kMaxReply;
  }
}

bool WireClient::read_line(std::string& line) {
  std::size_t nl;
  while ((nl = in_.find('\n')) == std::string::npos)
    if (!fill()) return false;
  line.assign(in_, 0, nl);
  in_.erase(0, nl + 1);
  return true;
}

bool WireClient::read_exact(std::size_t n, std::string& out) {
  while (in_.size() < n)
    if (!fill()) return false;
  out.assign(in_, 0, n);
  in_.erase(0, n);
  return true;
}

std::optional<Fields> WireClient::call_v1(std::string_view line) {
  std::string reply;
  if (!send(line) || !read_line(reply)) return std::nullopt;
  return parse_v1(reply);
}

std::string WireClient::frame_v2(std::string_view message) {
  char head[16];
  std::snprintf(head, sizeof head, "%6zu", message.size());
  return std::string(head) + std::string(message);
}

std::optional<Fields> WireClient::call_v2(std::string_view message) {
  std::string head, body;
  int length = 0;
  if (!send(frame_v2(message)) || !read_exact(6, head)) return std::nullopt;
  // Right-aligned ("%6d", MPICH's and corral's servers) or left-aligned ("%-6d").
  std::size_t first = head.find_first_not_of(' '), last = head.find_last_not_of(' ');
  if (first == std::string::npos || !parse_int(std::string_view(head).substr(first, last - first + 1), length) ||
      length < 0 ||
      static_cast<std::size_t>(length) > kMaxReply || !read_exact(static_cast<std::size_t>(length), body))
    return std::nullopt;
  return parse_v2(body);
}

std::vector<int> expand_process_mapping(std::string_view mapping, int size) {
  constexpr std::string_view kHead = "(vector";
  if (size < 1 || mapping.substr(0, kHead.size()) != kHead || mapping.back() != ')') return {};
  struct Block {
    int first, count, ranks;
  };
  std::vector<Block> blocks;
  std::string_view rest = mapping.substr(kHead.size(), mapping.size() - kHead.size() - 1);
  while (!rest.empty()) {
    auto open = rest.find('('), close = rest.find(')');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open) return {};
    std::string_view inner = rest.substr(open + 1, close - open - 1);
    auto c1 = inner.find(','), c2 = inner.rfind(',');
    Block b{};
    if (c1 == std::string_view::npos || c1 == c2 || !parse_int(inner.substr(0, c1), b.first) ||
        !parse_int(inner.substr(c1 + 1, c2 - c1 - 1), b.count) || !parse_int(inner.substr(c2 + 1), b.ranks) ||
        b.first < 0 || b.count < 1 || b.ranks < 1)
      return {};
    blocks.push_back(b);
    rest.remove_prefix(close + 1);
  }
  if (blocks.empty()) return {};
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(size));
  // As MPICH reads it: the list repeats until every rank has a node, and later passes
  // start at the first block on node 0.
  bool wrapped = false;
  while (static_cast<int>(out.size()) < size) {
    std::size_t i = 0;
    while (wrapped && blocks[i].first != 0) ++i;  // wrapped: some block starts at node 0
    for (; i < blocks.size() && static_cast<int>(out.size()) < size; ++i) {
      const Block& b = blocks[i];
      if (b.first == 0) wrapped = true;
      for (int node = 0; node < b.count; ++node)
        for (int r = 0; r < b.ranks && static_cast<int>(out.size()) < size; ++r) out.push_back(b.first + node);
    }
  }
  return out;
}

std::vector<int> ranks_on_node_of(const std::vector<int>& node_of_rank, int rank) {
  if (rank < 0 || static_cast<std::size_t>(rank) >= node_of_rank.size()) return {rank};
  std::vector<int> out;
  for (std::size_t r = 0; r < node_of_rank.size(); ++r)
    if (node_of_rank[r] == node_of_rank[static_cast<std::size_t>(rank)]) out.push_back(static_cast<int>(r));
  return out;
}

bool copy_out(const std::string& value, char* buffer, int length) {
  if (buffer == nullptr || length < 0 || value.size() + 1 > static_cast<std::size_t>(length)) return false;
  std::memcpy(buffer, value.c_str(), value.size() + 1);
  return true;
}

bool wire_word(std::string_view text, bool is_key) {
  if (text.empty()) return false;
  for (char c : text)
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f || (is_key && c == '=')) return false;
  return true;
}

namespace {

constexpr std::string_view kEncoded = "%corral:";

bool needs_escape(char c, bool v2) {
  auto u = static_cast<unsigned char>(c);
  return u < ' ' || u == 0x7f || c == '%' || (v2 ? c == ';' : c == ' ');
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string encode_value(std::string_view value, bool v2) {
  bool plain = value.substr(0, kEncoded.size()) != kEncoded;
  for (char c : value)
    if (c != '%' && needs_escape(c, v2)) plain = false;
  if (plain) return std::string(value);
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out(kEncoded);
  for (char c : value) {
    if (!needs_escape(c, v2)) {
      out += c;
      continue;
    }
    auto u = static_cast<unsigned char>(c);
    out += '%';
    out += kHex[u >> 4];
    out += kHex[u & 15];
  }
  return out;
}

std::string decode_value(std::string_view value) {
  if (value.substr(0, kEncoded.size()) != kEncoded) return std::string(value);
  value.remove_prefix(kEncoded.size());
  std::string out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    int hi = 0, lo = 0;
    if (value[i] == '%' && i + 2 < value.size() && (hi = hex_digit(value[i + 1])) >= 0 &&
        (lo = hex_digit(value[i + 2])) >= 0) {
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += value[i];
    }
  }
  return out;
}

std::optional<Fields> checked(std::optional<Fields> reply, const char* library, const std::string& what) {
  if (!reply) {
    complain(library, what + ": the connection to corral's PMI server was lost");
    return std::nullopt;
  }
  if (int_field(*reply, "rc", 0) != 0) {
    const std::string* msg = field(*reply, "msg");
    if (!msg) msg = field(*reply, "errmsg");
    complain(library, what + " failed" + (msg ? ": " + *msg : std::string()));
    return std::nullopt;
  }
  return reply;
}

void complain(const char* library, const std::string& what) {
  std::fprintf(stderr, "corral %s: %s\n", library, what.c_str());
}

}  // namespace corral::pmi_client
