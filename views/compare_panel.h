// The compare panel: two schedules of the current spec side by side.
//
// Slots A and B each hold a schedule and where it came from ("current schedule", "search node
// 66", "run 10:42:03"), and measured kernel times when it came from a run. Setting a slot compiles
// both schedules through the whole pipeline and estimates them with the cost model (on the
// panel's worker), then shows:
//   decisions   a unified diff of the two decision lists (one decision a line), so the
//               difference reads at the level the search works at, not as an IR diff;
//   stage diff  the unified diff of the two compilations' finished IR at a chosen stage;
//   kernels     per kernel of either side: estimated µs and bound (cost model), measured median µs
//               when the slot came from a run.
#pragma once

#include <QString>
#include <QWidget>

#include <memory>
#include <optional>
#include <vector>

#include "core/cost/cost_model.h"
#include "core/driver/pipeline.h"
#include "views/pipeline_runner.h"
#include "views/run_history_model.h"

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QTableWidget;

namespace nautilus::views {

class CodeHighlighter;
class TaskRunner;

class ComparePanel : public QWidget {
  Q_OBJECT

 public:
  enum Slot { A = 0, B = 1 };

  explicit ComparePanel(QWidget* parent = nullptr);

  // The spec and sizes both schedules are compiled for.
  void set_spec(const PipelineInputs& inputs);
  // Fills a slot; `measured` holds the kernel timings when the schedule was run.
  void set_slot(Slot slot, const sched::Schedule& schedule, const QString& origin,
                std::vector<KernelTiming> measured = {});
  void refresh_colors();

  bool busy() const;
  QPlainTextEdit* decisions_diff() const { return decisions_; }
  QPlainTextEdit* stage_diff() const { return stage_diff_; }
  QTableWidget* kernels() const { return kernels_; }
  QComboBox* stage_picker() const { return stage_; }

 Q_SIGNALS:
  void compared();

 private:
  struct Side {
    bool set = false;
    sched::Schedule schedule;
    QString origin;
    std::vector<KernelTiming> measured;
    std::shared_ptr<const driver::Compilation> compilation;
    std::optional<cost::CostEstimate> estimate;
  };
  void compile();
  void show_sides();
  void show_stage_diff();

  PipelineInputs inputs_;
  Side sides_[2];
  QLabel* labels_[2] = {nullptr, nullptr};
  QComboBox* stage_ = nullptr;
  QPlainTextEdit* decisions_ = nullptr;
  QPlainTextEdit* stage_diff_ = nullptr;
  CodeHighlighter* decisions_highlighter_ = nullptr;
  CodeHighlighter* stage_highlighter_ = nullptr;
  QTableWidget* kernels_ = nullptr;
  QLabel* status_ = nullptr;
  TaskRunner* worker_ = nullptr;
};

}  // namespace nautilus::views
