#include "cli/table.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace corral::cli {

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

namespace {

// One line of padded cells, trailing blanks dropped.
template <class Cells>
void append_line(std::string& out, const std::vector<Table::Column>& cols,
                 const std::vector<size_t>& width, const Cells& cells) {
  const size_t start = out.size();
  for (size_t c = 0; c < cols.size(); ++c) {
    const std::string_view cell = cells[c];
    if (c > 0) out += "  ";
    const size_t pad = width[c] - std::min(width[c], cell.size());
    const bool last = c + 1 == cols.size();
    if (cols[c].align == Table::Align::right) out.append(pad, ' ');
    out += cell;
    if (cols[c].align == Table::Align::left && !last) out.append(pad, ' ');
  }
  while (out.size() > start && out.back() == ' ') out.pop_back();
  out += '\n';
}

}  // namespace

void Table::render_to(std::FILE* out, size_t nrows, const CellSource& cells, bool header) const {
  // Each row's cells are made once: their text goes into one buffer (with where each
  // ends) while the widths are measured, then the lines are cut from it.
  const size_t ncols = columns_.size();
  std::vector<size_t> width(ncols, 0);
  std::vector<std::string> row(ncols);
  if (header)
    for (size_t c = 0; c < ncols; ++c) width[c] = columns_[c].header.size();
  std::string text;
  std::vector<size_t> ends;
  ends.reserve(nrows * ncols);
  for (size_t i = 0; i < nrows; ++i) {
    cells(i, row);
    for (size_t c = 0; c < ncols; ++c) {
      text += row[c];
      ends.push_back(text.size());
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string buf;
  constexpr size_t kFlush = 1 << 20;
  buf.reserve(kFlush + 4096);
  if (header) {
    std::vector<std::string_view> heads;
    for (const auto& col : columns_) heads.push_back(col.header);
    append_line(buf, columns_, width, heads);
  }
  std::vector<std::string_view> line(ncols);
  size_t begin = 0;
  for (size_t i = 0; i < nrows; ++i) {
    for (size_t c = 0; c < ncols; ++c) {
      const size_t end = ends[i * ncols + c];
      line[c] = std::string_view(text).substr(begin, end - begin);
      begin = end;
    }
    append_line(buf, columns_, width, line);
    if (buf.size() >= kFlush) {
      std::fwrite(buf.data(), 1, buf.size(), out);
      buf.clear();
    }
  }
  std::fwrite(buf.data(), 1, buf.size(), out);
}

std::string Table::render(bool header) const {
  std::vector<size_t> width(columns_.size(), 0);
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (header) width[c] = columns_[c].header.size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  if (header) {
    std::vector<std::string> heads;
    for (const auto& col : columns_) heads.push_back(col.header);
    append_line(out, columns_, width, heads);
  }
  for (const auto& row : rows_) append_line(out, columns_, width, row);
  return out;
}

}  // namespace corral::cli
