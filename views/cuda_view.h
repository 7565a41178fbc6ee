// The CUDA panel: the emitted CUDA C++ of the latest compilation (highlighted), and the ptxas
// report (registers, spills, shared memory, stack per kernel) of compiling it with NVRTC for the
// chosen architecture. The NVRTC compile runs on the panel's worker (tens of milliseconds to a
// few seconds); a newer source or arch drops the result of an older compile.
//
// Links: the emitter opens each section with a provenance comment (`// spec FILE:LINE ...`) and
// each op with its MA tile IR text (`// %acc1 = mma...`). Clicking a line emits the spec line of
// its section (`spec_line_selected`) and the MA value of the op it belongs to
// (`ma_value_selected`); `show_spec_line` marks every section of a spec line, which is how a
// selection in the editor or a graph shows up here.
#pragma once

#include <QString>
#include <QWidget>

#include <memory>
#include <string>

#include "core/codegen/emit_cuda.h"
#include "core/codegen/nvrtc.h"

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QTableWidget;

namespace nautilus::views {

class CodeHighlighter;
class TaskRunner;

class CudaView : public QWidget {
  Q_OBJECT

 public:
  explicit CudaView(QWidget* parent = nullptr);

  // Shows `cuda` (null: the reason in `why_not`) and starts the NVRTC compile.
  void set_cuda(std::shared_ptr<const codegen::EmittedModule> cuda, const QString& why_not = {});
  void refresh_colors();

  // Marks every section whose provenance comment names spec line `line` (1-based; 0 clears);
  // scrolls to the first. Returns the number of sections marked.
  int show_spec_line(int line);
  // Marks the CUDA lines of one MA op: its comment (`// ` + the op's MA tile IR text, which is
  // the MA graph node's label) and the code under it up to the next comment. Returns the number of
  // lines marked (0: no op with that text).
  int show_ma_op(const QString& op_text);
  // The spec line of the section containing text line `block` (0-based), or 0.
  int spec_line_at(int block) const;

  QPlainTextEdit* source_view() const { return source_; }
  QTableWidget* report_table() const { return report_; }
  QLabel* report_status() const { return status_; }
  bool compiling() const;
  const codegen::PtxasReport& report() const { return ptxas_; }

 Q_SIGNALS:
  void spec_line_selected(int line);
  void ma_value_selected(const QString& value);
  void compiled(bool ok);

 private:
  void compile();
  void on_cursor_moved();

  std::shared_ptr<const codegen::EmittedModule> cuda_;
  codegen::PtxasReport ptxas_;
  QPlainTextEdit* source_ = nullptr;
  CodeHighlighter* highlighter_ = nullptr;
  QComboBox* arch_ = nullptr;
  QLabel* status_ = nullptr;
  QTableWidget* report_ = nullptr;
  TaskRunner* worker_ = nullptr;
  int last_reported_line_ = -1;
};

}  // namespace nautilus::views
