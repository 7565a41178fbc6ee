// A read-only QTableWidget cell, right-aligned for numbers: the tables of the CUDA view (ptxas
// report), the compare panel (kernels of A and B) and the profiler (timed kernels).
#pragma once

#include <QString>
#include <QTableWidgetItem>

namespace nautilus::views {

inline QTableWidgetItem* table_cell(const QString& text, bool number = true) {
  auto* item = new QTableWidgetItem(text);
  item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsSelectable);
  if (number) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return item;
}

}  // namespace nautilus::views
