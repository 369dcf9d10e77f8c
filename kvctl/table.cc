#include "kvctl/table.h"

#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstdlib>

namespace nanokv::kvctl {

bool UseColour(ColourMode mode, int fd) {
  if (mode != ColourMode::kAuto) return mode == ColourMode::kAlways;
  const char* no_colour = std::getenv("NO_COLOR");
  if (no_colour != nullptr && *no_colour != '\0') return false;
  return isatty(fd) == 1;
}

std::string Paint(std::string_view text, Tint tint, bool colour) {
  if (!colour || tint == Tint::kPlain) return std::string(text);
  const char* sgr = "";
  switch (tint) {
    case Tint::kGood:
      sgr = "\033[32m";
      break;
    case Tint::kWarn:
      sgr = "\033[33m";
      break;
    case Tint::kBad:
      sgr = "\033[31m";
      break;
    case Tint::kDim:
      sgr = "\033[2m";
      break;
    case Tint::kBold:
      sgr = "\033[1m";
      break;
    case Tint::kPlain:
      break;
  }
  return std::string(sgr) + std::string(text) + "\033[0m";
}

std::string Sanitize(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

Tint TintForShare(double fraction) {
  if (fraction >= 0.9) return Tint::kBad;
  if (fraction >= 0.75) return Tint::kWarn;
  return Tint::kGood;
}

void Table::AddRow(std::vector<Cell> cells) {
  assert(cells.size() == columns_.size());
  cells.resize(columns_.size(), Cell(""));
  for (Cell& cell : cells) cell.text = Sanitize(cell.text);
  rows_.push_back(std::move(cells));
}

std::string Table::Render(bool colour, size_t max_width) const {
  std::vector<size_t> widths(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    widths[c] = columns_[c].header.size();
    for (const auto& row : rows_) widths[c] = std::max(widths[c], row[c].text.size());
  }
  auto total = [&] {
    size_t sum = widths.empty() ? 0 : 2 * (widths.size() - 1);
    for (size_t w : widths) sum += w;
    return sum;
  };
  while (max_width > 0 && total() > max_width) {
    size_t widest = columns_.size();
    for (size_t c = 0; c < columns_.size(); ++c) {
      const size_t least = std::max<size_t>(columns_[c].header.size(), 6);
      if (columns_[c].clip && widths[c] > least && (widest == columns_.size() || widths[c] > widths[widest])) {
        widest = c;
      }
    }
    if (widest == columns_.size()) break;  // nothing left to give: the figures stay whole
    --widths[widest];
  }
  std::string out;
  auto emit = [&](const std::vector<Cell>& cells) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c) {
      std::string text = cells[c].text;
      if (text.size() > widths[c]) text = text.substr(0, widths[c] - 1) + "~";
      const bool last = c + 1 == cells.size();
      std::string pad(widths[c] - text.size(), ' ');
      if (c > 0) line += "  ";
      if (columns_[c].align == Align::kRight) line += pad;
      line += Paint(text, cells[c].tint, colour);
      if (columns_[c].align == Align::kLeft && !last) line += pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  std::vector<Cell> header;
  for (const Column& column : columns_) header.emplace_back(column.header, Tint::kBold);
  emit(header);
  for (const auto& row : rows_) emit(row);
  return out;
}

}  // namespace nanokv::kvctl
