// The client side of the PMI wire protocols, shared by libpmi.so and libpmi2.so: the socket
// the node agent hands a task as PMI_FD, one request and its reply at a time. PMI-1 is
// "cmd=NAME k=v ...\n" lines; PMI-2 is the same init line, then messages that start with
// their length in 6 characters, "cmd=NAME;k=v;...;". The server side, and the limits it
// announces, are src/node/pmi/pmi_wire.h and pmi_server.h.
//
// This code runs inside users' programs: it allocates little, throws nothing across the C
// interface, and never prints unless a call fails.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace corral::pmi_client {

using Fields = std::vector<std::pair<std::string, std::string>>;

// The value of `key` in a reply, or null.
const std::string* field(const Fields& fields, std::string_view key);
// An integer field; `fallback` when it is missing or not a whole number.
int int_field(const Fields& fields, std::string_view key, int fallback);

// "cmd=x a=b c=d" (PMI-1; a word without '=' continues the value before it).
Fields parse_v1(std::string_view line);
// "cmd=x;a=b;" (PMI-2).
Fields parse_v2(std::string_view message);

// Where this task's PMI server is, from the environment the agent sets.
struct TaskEnv {
  int fd = -1;  // -1: no PMI_FD, a singleton
  int rank = 0;
  int size = 1;
};
// Null with `error` set when PMI_FD is there but it, PMI_RANK or PMI_SIZE is not usable.
std::optional<TaskEnv> read_task_env(std::string& error);

class WireClient {
 public:
  explicit WireClient(int fd) : fd_(fd) {}
  // Sends one PMI-1 line (with its '\n') and reads the reply line; null if the socket failed.
  std::optional<Fields> call_v1(std::string_view line);
  // Sends one PMI-2 message ("cmd=...;", without its length) and reads the reply.
  std::optional<Fields> call_v2(std::string_view message);
  // Sends without waiting for an answer (abort).
  bool send(std::string_view data);
  static std::string frame_v2(std::string_view message);

 private:
  bool read_line(std::string& line);
  bool read_exact(std::size_t n, std::string& out);
  bool fill();
  int fd_;
  std::string in_;
};

// The node of every rank from MPICH's PMI_process_mapping, "(vector,(first,count,ranks),...)"
// repeated until `size` ranks have one; empty if the text is not one.
std::vector<int> expand_process_mapping(std::string_view mapping, int size);
// The ranks that share `rank`'s node, in order; just `rank` when the layout is unknown.
std::vector<int> ranks_on_node_of(const std::vector<int>& node_of_rank, int rank);

// Copies `value` and its terminating NUL into a caller's buffer of `length` bytes; false if
// it does not fit.
bool copy_out(const std::string& value, char* buffer, int length);
// A word the PMI-1 wire can carry: not empty, no whitespace or control characters, and for
// keys no '='.
bool wire_word(std::string_view text, bool is_key);
// Values the wire cannot carry as they are (PMI-1: whitespace, which Open MPI pads its
// base64 with; PMI-2: ';'; both: control characters) travel percent-encoded behind a
// marker, and come back decoded on a get; every other value is sent unchanged, so clients
// that speak the wire themselves see the same keys. kEncodingRoom is what the encoding may
// add to a value the program is told fits (the announced maximum less this).
inline constexpr int kEncodingRoom = 16;
std::string encode_value(std::string_view value, bool v2);
std::string decode_value(std::string_view value);

// `reply` if it came and says rc=0; else null, after saying what failed: the lost
// connection, or the server's own words (PMI-1 sends them as msg=, PMI-2 as errmsg=).
std::optional<Fields> checked(std::optional<Fields> reply, const char* library, const std::string& what);

// Says what went wrong, once per call that failed: "corral libpmi: ...".
void complain(const char* library, const std::string& what);

}  // namespace corral::pmi_client
