#include "cli/table.h"

#include <algorithm>
#include <utility>

namespace corral::cli {

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::render(bool header) const {
  std::vector<size_t> width(columns_.size(), 0);
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (header) width[c] = columns_[c].header.size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) line += "  ";
      const size_t pad = width[c] - cells[c].size();
      const bool last = c + 1 == cells.size();
      if (columns_[c].align == Align::right) line.append(pad, ' ');
      line += cells[c];
      if (columns_[c].align == Align::left && !last) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  if (header) {
    std::vector<std::string> heads;
    for (const auto& col : columns_) heads.push_back(col.header);
    emit(heads);
  }
  for (const auto& row : rows_) emit(row);
  return out;
}

}  // namespace corral::cli
