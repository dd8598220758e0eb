// Column output for queue and nodes: columns padded to their widest cell, numbers
// right-aligned, the last column never padded (so long node lists don't add blanks).
#pragma once

#include <string>
#include <vector>

namespace corral::cli {

class Table {
 public:
  enum class Align { left, right };
  struct Column {
    std::string header;
    Align align = Align::left;
  };

  explicit Table(std::vector<Column> columns);
  void add_row(std::vector<std::string> cells);  // missing cells are blank
  std::string render(bool header = true) const;
  size_t rows() const { return rows_.size(); }

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace corral::cli
