// Column output for queue and nodes: columns padded to their widest cell, numbers
// right-aligned, the last column never padded (so long node lists don't add blanks).
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
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

  // For listings of 100,000 rows: no row is stored. `cells(i, row)` fills row i's cells
  // (called twice per row: for the widths, then to write), reusing `row`'s strings, and
  // the text goes to `out` in large writes.
  using CellSource = std::function<void(size_t, std::vector<std::string>&)>;
  void render_to(std::FILE* out, size_t nrows, const CellSource& cells, bool header) const;

  // The same without a string per cell: `cells(i, views)` points views[0..columns) at row
  // i's text, which must stay valid until the next call. Called twice per row (widths,
  // then the write), so it should be cheap.
  using CellViews = std::function<void(size_t, std::string_view*)>;
  void render_views(std::FILE* out, size_t nrows, const CellViews& cells, bool header) const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace corral::cli
