#!/usr/bin/env bash
# Packs Nautilus Studio with the libraries it loads into one self-contained folder, for a GPU
# host that has the NVIDIA driver and CUDA (NVRTC) but no Qt or Graphviz -- the usual shape of a
# shared GPU server. Beside the window's own GPU-less workflow (the Profiler panel's runner
# command template, e.g. `ssh gpuhost nautilus-runner`), this runs the whole app on the GPU host:
#
#   tools/bundle-studio.sh BUILD_DIR OUT.tar.xz
#   scp OUT.tar.xz gpuhost: && ssh gpuhost 'tar xf OUT.tar.xz && nautilus-studio-bundle/run \
#       --screenshot profiler.png --panel profiler --profile current assets/specs/attention.nt'
#
# `run` sets the library, Qt plugin, Graphviz plugin and font paths and starts the studio (with
# no display it renders offscreen: --screenshot, --profile). The bundle holds nautilus-studio,
# nautilus-runner and nautilus, every shared library they need except the C library, the CUDA
# driver and NVRTC (the host's own must be used), Qt's offscreen and xcb platform plugins,
# Graphviz's layout plugins and the DejaVu fonts.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: tools/bundle-studio.sh BUILD_DIR OUT.tar.xz" >&2
  exit 2
fi
build_dir=$1
out=$2
studio="$build_dir/app/nautilus-studio"
for binary in "$studio" "$build_dir/app/nautilus-runner" "$build_dir/app/nautilus"; do
  [[ -x $binary ]] || { echo "bundle-studio: $binary is not built" >&2; exit 1; }
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
bundle="$stage/nautilus-studio-bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/plugins/platforms" "$bundle/graphviz" "$bundle/fonts"
for binary in nautilus-studio nautilus-runner nautilus; do
  cp "$build_dir/app/$binary" "$bundle/bin/"
  strip "$bundle/bin/$binary"
done

qt_plugins=/usr/lib/x86_64-linux-gnu/qt6/plugins
graphviz=/usr/lib/x86_64-linux-gnu/graphviz
cp "$qt_plugins/platforms/libqoffscreen.so" "$qt_plugins/platforms/libqxcb.so" "$bundle/plugins/platforms/"
if [[ -d $qt_plugins/xcbglintegrations ]]; then cp -r "$qt_plugins/xcbglintegrations" "$bundle/plugins/"; fi
cp "$graphviz"/config6a "$graphviz"/libgvplugin_core.so.6 "$graphviz"/libgvplugin_dot_layout.so.6 \
  "$bundle/graphviz/"
cp /usr/share/fonts/truetype/dejavu/*.ttf "$bundle/fonts/"
# Qt finds fonts through fontconfig, which without a configuration file finds none (every glyph
# a box). This one names the bundle's fonts, relative to its own folder.
cat >"$bundle/fonts/fonts.conf" <<'CONF'
<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig>
  <dir prefix="relative">.</dir>
  <alias><family>sans-serif</family><prefer><family>DejaVu Sans</family></prefer></alias>
  <alias><family>monospace</family><prefer><family>DejaVu Sans Mono</family></prefer></alias>
  <match target="pattern"><edit name="family" mode="append_last"><string>DejaVu Sans</string></edit></match>
  <cachedir prefix="xdg">nautilus-studio-bundle</cachedir>
</fontconfig>
CONF

# The shared libraries of everything above, minus the ones that must come from the host: the C
# library and loader (ABI of the host's kernel interface), the CUDA driver and NVRTC (tied to
# the host's driver), and the GL/EGL vendor libraries (tied to its display stack).
host_only='^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libcuda|libnvrtc|libnvrtc-builtins|libGLX_|libEGL_)[.-]'
{
  ldd "$bundle"/bin/* "$bundle"/plugins/platforms/*.so "$bundle"/graphviz/*.so.6 2>/dev/null |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
} | sort -u | while read -r library; do
  name=$(basename "$library")
  [[ $name =~ $host_only ]] && continue
  cp -L "$library" "$bundle/lib/$name"
done

cat >"$bundle/run" <<'RUN'
#!/usr/bin/env bash
# Starts the bundled Nautilus Studio (see tools/bundle-studio.sh in the repository).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export QT_PLUGIN_PATH="$here/plugins"
export QT_QPA_FONTDIR="$here/fonts"
export FONTCONFIG_FILE="$here/fonts/fonts.conf"
export GVBINDIR="$here/graphviz"
if [[ -z ${DISPLAY:-} && -z ${QT_QPA_PLATFORM:-} ]]; then export QT_QPA_PLATFORM=offscreen; fi
exec "$here/bin/nautilus-studio" "$@"
RUN
chmod +x "$bundle/run"

tar -C "$stage" -cJf "$out" nautilus-studio-bundle
echo "bundle-studio: $(du -h "$out" | cut -f1) in $out ($(ls "$bundle/lib" | wc -l) libraries)"
