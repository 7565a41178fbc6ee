// Responsiveness of the search panel while a search tree grows (bench/studio/README.md).
//
// The search hands the panel its whole tree after every round (SearchObserver::on_tree); the
// panel's SearchTreeModel inserts the new nodes as rows and updates the rows whose status
// changed, and the QTreeView lays out and paints. All of that runs on the UI thread, so each
// update must fit in a frame (16 ms at 60 Hz). This program grows a synthetic tree of 5,000
// nodes (8 children per expanded node, every third leaf pruned, a schedule of up to five
// decisions per node, as the auto-scheduler's) through SearchPanel::show_tree in increments, on
// Qt's offscreen platform, and times each update: the model update, then the view's layout and
// a full repaint of its viewport. It also times one measurement arriving (the Measure button's
// per-result update of the "measured µs" cell) against the full tree.
//
//   search_tree_bench [--nodes N] [--increments 10,50,250] [--width W --height H]
//
// Prints, per increment and view state (collapsed below depth 1 as the panel opens, or every
// row expanded), the median, 95th percentile and worst update in milliseconds.
#include <QApplication>
#include <QElapsedTimer>
#include <QTreeView>

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/cost/cost_model.h"
#include "core/sched/decision.h"
#include "core/search/search.h"
#include "views/search_panel.h"
#include "views/search_tree_model.h"

namespace {

using nautilus::search::NodeStatus;
using nautilus::search::SearchNode;

constexpr int kFanOut = 8;

// The first `count` nodes of an 8-ary tree in id order (parents before children, each parent's
// children in id order, as the search numbers them), with the statuses a search shows while
// it runs: nodes with children are expanded, others open, every third childless node pruned.
std::vector<SearchNode> synthetic_tree(int count, bool finished) {
  std::vector<SearchNode> nodes(static_cast<size_t>(count));
  for (int id = 0; id < count; ++id) {
    SearchNode& node = nodes[static_cast<size_t>(id)];
    node.id = id;
    node.parent = id == 0 ? -1 : (id - 1) / kFanOut;
    if (id > 0) {
      nautilus::sched::Decision decision;
      decision.kind = "tile";
      decision.target = "C_sum";
      decision.args.push_back({"m", int64_t{16} << (id % 4)});
      decision.args.push_back({"n", int64_t{16} << ((id / 4) % 4)});
      decision.args.push_back({"k", int64_t{16} << ((id / 16) % 3)});
      node.decision = decision;
      node.schedule = nodes[static_cast<size_t>(node.parent)].schedule;
      node.schedule.decisions.push_back(decision);
      nodes[static_cast<size_t>(node.parent)].children.push_back(id);
    }
    nautilus::cost::CostEstimate estimate;
    estimate.microseconds = 10.0 + (id * 37 % 1000) / 10.0;
    estimate.feasible = true;
    node.estimate = estimate;
  }
  for (SearchNode& node : nodes) {
    if (!node.children.empty()) {
      node.status = NodeStatus::Expanded;
    } else if (node.id % 3 == 0) {
      node.status = NodeStatus::Pruned;
      node.reason = "beam";
    } else {
      node.status = finished ? NodeStatus::Leaf : NodeStatus::Open;
    }
  }
  return nodes;
}

// CPU time of the calling (UI) thread in ms: on a loaded machine the wall clock also counts
// the time other processes held the cores.
double thread_cpu_ms() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

struct Stats {
  double median = 0, p95 = 0, worst = 0;
  int updates = 0;
};

Stats summarize(std::vector<double> ms) {
  Stats stats;
  if (ms.empty()) return stats;
  std::sort(ms.begin(), ms.end());
  stats.updates = static_cast<int>(ms.size());
  stats.median = ms[ms.size() / 2];
  stats.p95 = ms[std::min(ms.size() - 1, ms.size() * 95 / 100)];
  stats.worst = ms.back();
  return stats;
}

// Grows a fresh panel's tree to `total` nodes, `increment` nodes per update; returns the time of
// each update (model + layout + paint), in ms of wall clock, in `cpu_ms` of the UI thread's CPU
// time, and in `model_ms` the model's share (wall clock).
std::vector<double> grow(int total, int increment, bool expand_all, int width, int height,
                         std::vector<double>* measurement_ms, std::vector<double>* model_ms,
                         std::vector<double>* cpu_ms) {
  nautilus::views::SearchPanel panel;
  panel.resize(width, height);
  panel.show();
  QApplication::processEvents();
  QTreeView* view = panel.tree();
  std::vector<double> times;
  for (int count = increment; count < total + increment; count += increment) {
    const int size = std::min(count, total);
    // The copy is made on the search's thread in the studio (the observer's queued call).
    std::vector<SearchNode> nodes = synthetic_tree(size, size == total);
    if (expand_all) {
      // Rows the user expanded stay expanded; new rows arrive collapsed. Expanding is a user
      // action between frames, not part of an update.
      view->expandAll();
      QApplication::processEvents();
      view->viewport()->repaint();
    }
    QElapsedTimer timer;
    timer.start();
    const double cpu_start = thread_cpu_ms();
    panel.show_tree(std::move(nodes));
    model_ms->push_back(static_cast<double>(timer.nsecsElapsed()) / 1e6);
    QApplication::processEvents();  // the view's posted layout and geometry updates
    view->viewport()->repaint();    // a full frame of the visible rows
    times.push_back(static_cast<double>(timer.nsecsElapsed()) / 1e6);
    cpu_ms->push_back(thread_cpu_ms() - cpu_start);
  }
  if (measurement_ms != nullptr) {
    // Tuner results for the schedules of the last leaves, one at a time: each is found by its
    // text among all nodes (the first one prints every node's schedule), its cell updated and
    // the view repainted.
    const std::vector<SearchNode>& all = panel.model()->nodes();
    for (size_t i = all.size() - 8; i < all.size(); ++i) {
      const std::string text = nautilus::sched::print_decisions(all[i].schedule.decisions, "; ");
      QElapsedTimer timer;
      timer.start();
      const int found = panel.model()->set_measurement(text, 12.5, QString());
      QApplication::processEvents();
      view->viewport()->repaint();
      measurement_ms->push_back(static_cast<double>(timer.nsecsElapsed()) / 1e6);
      if (found < 0) std::fprintf(stderr, "search_tree_bench: a measured node was not found\n");
    }
  }
  return times;
}

std::vector<int> parse_list(const char* text) {
  std::vector<int> values;
  std::string item;
  for (const char* c = text;; ++c) {
    if (*c == ',' || *c == '\0') {
      if (!item.empty()) values.push_back(std::atoi(item.c_str()));
      item.clear();
      if (*c == '\0') break;
    } else {
      item += *c;
    }
  }
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  int total = 5000, width = 1200, height = 800;
  std::vector<int> increments = {10, 50, 250};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--nodes") == 0) total = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--increments") == 0) increments = parse_list(argv[i + 1]);
    else if (std::strcmp(argv[i], "--width") == 0) width = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--height") == 0) height = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: search_tree_bench [--nodes N] [--increments A,B,...] "
                           "[--width W] [--height H]\n");
      return 2;
    }
  }
  QApplication app(argc, argv);
  std::printf("search panel, %d-node tree grown on %s, view %dx%d: ms per update (model + "
              "layout + paint)\n",
              total, qPrintable(QApplication::platformName()), width, height);
  std::printf("(UI thread CPU: the first update of each run, the panel's first rows, is shown "
              "apart)\n");
  std::printf("%-10s %-9s %7s | %-22s | %-30s | %s\n", "", "", "", "wall clock",
              "UI thread CPU", "model");
  std::printf("%-10s %-9s %7s | %6s %7s %7s | %6s %7s %7s %7s | %s\n", "increment", "view",
              "updates", "median", "p95", "worst", "first", "median", "p95", "worst", "median");
  bool over = false;
  std::vector<double> measurement_ms;
  for (int increment : increments) {
    if (increment <= 0) continue;
    for (bool expand_all : {false, true}) {
      std::vector<double> model_ms, cpu_ms;
      const Stats stats =
          summarize(grow(total, increment, expand_all, width, height,
                         expand_all || !measurement_ms.empty() ? nullptr : &measurement_ms,
                         &model_ms, &cpu_ms));
      const Stats model = summarize(model_ms);
      const double first_cpu = cpu_ms.front();
      const Stats cpu = summarize(std::vector<double>(cpu_ms.begin() + 1, cpu_ms.end()));
      over = over || cpu.worst > 16.0 || first_cpu > 16.0;
      std::printf("%-10d %-9s %7d | %6.2f %7.2f %7.2f | %6.2f %6.2f %7.2f %7.2f | %.2f\n",
                  increment, expand_all ? "expanded" : "depth 1", stats.updates, stats.median,
                  stats.p95, stats.worst, first_cpu, cpu.median, cpu.p95, cpu.worst, model.median);
    }
  }
  if (!measurement_ms.empty()) {
    const double first = measurement_ms.front();
    const Stats later = summarize(std::vector<double>(measurement_ms.begin() + 1, measurement_ms.end()));
    std::printf("a measurement arriving (find the node by schedule, update its cell, repaint), wall "
                "clock: first %.2f ms, later median %.2f ms, worst %.2f ms\n",
                first, later.median, later.worst);
  }
  std::printf("%s\n", over ? "some update used more than a 16 ms frame of UI-thread CPU"
                           : "every update fit in a 16 ms frame of UI-thread CPU");
  return 0;
}
