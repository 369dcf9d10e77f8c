// Aligned text tables for kvctl's views, and the one place that decides
// whether output is coloured: only on a terminal, never when NO_COLOR is set
// (https://no-color.org), unless --color says otherwise.
//
// Cell text comes from the segment, another process's bytes: Sanitize() keeps
// printable ASCII only, so a name can neither misalign a table nor smuggle a
// terminal escape sequence onto the operator's screen.
#ifndef NANOKV_KVCTL_TABLE_H_
#define NANOKV_KVCTL_TABLE_H_

#include <string>
#include <string_view>
#include <vector>

namespace nanokv::kvctl {

enum class ColourMode { kAuto, kAlways, kNever };

// kAuto: `fd` is a terminal and NO_COLOR is unset or empty.
bool UseColour(ColourMode mode, int fd);

// How a cell or a piece of a line is shown when colour is on.
enum class Tint { kPlain, kGood, kWarn, kBad, kDim, kBold };

// `text` wrapped in the SGR sequence for `tint`, or `text` as is.
std::string Paint(std::string_view text, Tint tint, bool colour);

// Printable ASCII only: every other byte becomes '?'.
std::string Sanitize(std::string_view text);

// Green under 75 %, yellow under 90 %, red from there.
Tint TintForShare(double fraction);

enum class Align { kLeft, kRight };

struct Column {
  std::string header;
  Align align = Align::kLeft;
  // A name column that may be clipped (with '~') to fit a narrow terminal;
  // figures never are.
  bool clip = false;
};

struct Cell {
  Cell(std::string text_in, Tint tint_in = Tint::kPlain)  // NOLINT: implicit from text
      : text(std::move(text_in)), tint(tint_in) {}
  Cell(const char* text_in, Tint tint_in = Tint::kPlain)  // NOLINT
      : text(text_in), tint(tint_in) {}
  std::string text;
  Tint tint;
};

class Table {
 public:
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

  // REQUIRES: cells.size() == number of columns. Text is sanitized here.
  void AddRow(std::vector<Cell> cells);
  size_t rows() const { return rows_.size(); }

  // The header and every row, two spaces between columns, no trailing
  // blanks, each line ending in '\n'. With no rows, just the header. With
  // `max_width` (a terminal's columns; 0: none), the widest clip columns
  // give way first, down to their header or 6 characters, until lines fit.
  std::string Render(bool colour, size_t max_width = 0) const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<Cell>> rows_;
};

}  // namespace nanokv::kvctl

#endif  // NANOKV_KVCTL_TABLE_H_
