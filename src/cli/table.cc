#include "cli/table.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace corral::cli {

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

namespace {

// The most one line of these cells can take, newline included.
size_t line_bound(const std::vector<size_t>& width, const std::string_view* cells) {
  size_t n = 1;
  for (size_t c = 0; c < width.size(); ++c) n += std::max(width[c], cells[c].size()) + 2;
  return n;
}

// Writes one line of padded cells at `p` (line_bound bytes available), trailing blanks
// dropped; returns the end.
char* put_line(char* p, const std::vector<Table::Column>& cols, const std::vector<size_t>& width,
               const std::string_view* cells) {
  char* const start = p;
  for (size_t c = 0; c < cols.size(); ++c) {
    const std::string_view cell = cells[c];
    if (c > 0) {
      *p++ = ' ';
      *p++ = ' ';
    }
    const size_t pad = width[c] - std::min(width[c], cell.size());
    const bool last = c + 1 == cols.size();
    if (cols[c].align == Table::Align::right) p = std::fill_n(p, pad, ' ');
    if (!cell.empty()) std::memcpy(p, cell.data(), cell.size());
    p += cell.size();
    if (cols[c].align == Table::Align::left && !last) p = std::fill_n(p, pad, ' ');
  }
  while (p > start && p[-1] == ' ') --p;
  *p++ = '\n';
  return p;
}

void append_line(std::string& out, const std::vector<Table::Column>& cols, const std::vector<size_t>& width,
                 const std::string_view* cells) {
  const size_t at = out.size();
  out.resize(at + line_bound(width, cells));
  char* end = put_line(out.data() + at, cols, width, cells);
  out.resize(static_cast<size_t>(end - out.data()));
}

// Lines gathered in one buffer and written out in large pieces.
class LineWriter {
 public:
  LineWriter(std::FILE* out, const std::vector<Table::Column>& cols, const std::vector<size_t>& width)
      : out_(out), cols_(cols), width_(width), buf_(kFlush) {}
  LineWriter(const LineWriter&) = delete;
  LineWriter& operator=(const LineWriter&) = delete;
  ~LineWriter() { flush(); }

  void line(const std::string_view* cells) {
    const size_t need = line_bound(width_, cells);
    if (buf_.size() - used_ < need) {
      flush();
      if (buf_.size() < need) buf_.resize(need);
    }
    used_ = static_cast<size_t>(put_line(buf_.data() + used_, cols_, width_, cells) - buf_.data());
  }

 private:
  static constexpr size_t kFlush = 1 << 20;
  void flush() {
    if (used_ > 0) std::fwrite(buf_.data(), 1, used_, out_);
    used_ = 0;
  }

  std::FILE* out_;
  const std::vector<Table::Column>& cols_;
  const std::vector<size_t>& width_;
  std::vector<char> buf_;
  size_t used_ = 0;
};

}  // namespace

void Table::render_views(std::FILE* out, size_t nrows, const CellViews& cells, bool header) const {
  const size_t ncols = columns_.size();
  std::vector<size_t> width(ncols, 0);
  std::vector<std::string_view> row(ncols);
  if (header)
    for (size_t c = 0; c < ncols; ++c) width[c] = columns_[c].header.size();
  // A left-aligned last column is never padded, so it needs no measuring.
  const bool last_padded = ncols > 0 && columns_.back().align == Align::right;
  const size_t measured = last_padded || ncols == 0 ? ncols : ncols - 1;
  for (size_t i = 0; i < nrows; ++i) {
    cells(i, row.data());
    for (size_t c = 0; c < measured; ++c) width[c] = std::max(width[c], row[c].size());
  }
  LineWriter w(out, columns_, width);
  if (header) {
    for (size_t c = 0; c < ncols; ++c) row[c] = columns_[c].header;
    w.line(row.data());
  }
  for (size_t i = 0; i < nrows; ++i) {
    cells(i, row.data());
    w.line(row.data());
  }
}

void Table::render_to(std::FILE* out, size_t nrows, const CellSource& cells, bool header) const {
  std::vector<std::string> row(columns_.size());
  render_views(
      out, nrows,
      [&](size_t i, std::string_view* views) {
        cells(i, row);
        for (size_t c = 0; c < row.size(); ++c) views[c] = row[c];
      },
      header);
}

std::string Table::render(bool header) const {
  std::vector<size_t> width(columns_.size(), 0);
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (header) width[c] = columns_[c].header.size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  std::vector<std::string_view> line(columns_.size());
  if (header) {
    for (size_t c = 0; c < columns_.size(); ++c) line[c] = columns_[c].header;
    append_line(out, columns_, width, line.data());
  }
  for (const auto& row : rows_) {
    for (size_t c = 0; c < columns_.size(); ++c) line[c] = row[c];
    append_line(out, columns_, width, line.data());
  }
  return out;
}

}  // namespace corral::cli
