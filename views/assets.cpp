#include "views/assets.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>

namespace nautilus::views {
namespace {

bool is_assets_dir(const QString& path) {
  return !path.isEmpty() && QFileInfo(QDir(path).filePath(QStringLiteral("specs"))).isDir();
}

}  // namespace

QString find_assets_dir() {
  const QString from_env = qEnvironmentVariable("NAUTILUS_ASSETS_DIR");
  if (is_assets_dir(from_env)) return QDir(from_env).absolutePath();

  // applicationDirPath() needs a QCoreApplication; tests and tools may call this without one.
  if (QCoreApplication::instance() != nullptr) {
    const QDir bin(QCoreApplication::applicationDirPath());
    const QString installed = bin.filePath(QStringLiteral("../share/nautilus/assets"));
    if (is_assets_dir(installed)) return QDir(installed).absolutePath();

    // A few levels cover build/app/, build/tests/ and build-<name>/app/.
    QDir dir = bin;
    for (int level = 0; level < 4 && dir.cdUp(); ++level) {
      const QString candidate = dir.filePath(QStringLiteral("assets"));
      if (is_assets_dir(candidate)) return QDir(candidate).absolutePath();
    }
  }

#ifdef NAUTILUS_SOURCE_ASSETS_DIR
  const QString source = QStringLiteral(NAUTILUS_SOURCE_ASSETS_DIR);
  if (is_assets_dir(source)) return QDir(source).absolutePath();
#endif
  return {};
}

QStringList list_specs(const QString& directory) {
  QStringList paths;
  const QDir dir(directory);
  for (const QFileInfo& info :
       dir.entryInfoList({QStringLiteral("*.nt")}, QDir::Files | QDir::Readable, QDir::Name)) {
    paths << info.absoluteFilePath();
  }
  return paths;
}

}  // namespace nautilus::views
