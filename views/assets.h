// Where the app's assets (example specs, later icons and stylesheets) are.
#pragma once

#include <QString>
#include <QStringList>

namespace nautilus::views {

// The assets directory, or an empty string when none is found. Looked up in order:
//   1. $NAUTILUS_ASSETS_DIR;
//   2. next to an installed executable: <bin>/../share/nautilus/assets;
//   3. in a build tree inside the source tree: <build>/app/nautilus-studio -> <source>/assets,
//      found by walking up from the executable;
//   4. the source tree this binary was built from (a compile-time path).
// A candidate counts only if it contains `specs/`.
QString find_assets_dir();

// Absolute paths of the `.nt` files directly in `directory`, sorted by file name.
QStringList list_specs(const QString& directory);

}  // namespace nautilus::views
