#!/bin/sh
# Load the images of one rapidship export on a host with no network.
#
#   sh install.sh [--registry HOST[:PORT][/PREFIX]] [--insecure] [--tmp DIR] VOLUME_DIR...
#
# VOLUME_DIR: one directory per volume (a mounted disc or a copy of it); default: this script's
# directory. Every file of every volume is checked against SHA256SUMS, and all volumes of the
# export must be present, BEFORE anything is loaded: a damaged or missing disc loads nothing.
# Then the parts are joined and decompressed straight into `docker load` (or, with --registry,
# into a temporary docker-archive that skopeo pushes), and every image id is compared with the
# one recorded at export time.
# Needs: sh, sha256sum, zstd, and docker (or skopeo with --registry).
set -eu

# @EXPORT_DATA@

REGISTRY=""
TLS_VERIFY=true
TMP_ROOT="${TMPDIR:-/var/tmp}"
DIRS=""

die() { echo "install.sh: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "$1 is not installed; $2"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --registry) [ $# -ge 2 ] || die "--registry needs HOST[:PORT][/PREFIX]"; REGISTRY="$2"; shift 2 ;;
    --registry=*) REGISTRY="${1#--registry=}"; shift ;;
    --insecure) TLS_VERIFY=false; shift ;;
    --tmp) [ $# -ge 2 ] || die "--tmp needs a directory"; TMP_ROOT="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) die "unknown option $1 (see: sh install.sh --help)" ;;
    *) DIRS="$DIRS
$1"; shift ;;
  esac
done
[ -n "$DIRS" ] || DIRS=$(cd "$(dirname "$0")" && pwd)

need sha256sum "install coreutils"
need zstd "install the zstd package (Debian/Ubuntu: apt-get install zstd; RPM: dnf install zstd)"
if [ -n "$REGISTRY" ]; then need skopeo "install skopeo, or leave out --registry to load into docker"
else need docker "install Docker, or pass --registry to push with skopeo"; fi

# 1. Which volume is where; each must belong to this export and appear once.
OLDIFS=$IFS
IFS='
'
for d in $DIRS; do
  [ -d "$d" ] || die "$d: no such directory"
  [ -f "$d/MANIFEST.json" ] || die "$d: no MANIFEST.json here: not a volume of a rapidship export"
  id=$(sed -n 's/^  "export_id": "\(.*\)",$/\1/p' "$d/MANIFEST.json")
  n=$(sed -n 's/^  "volume": \([0-9][0-9]*\),$/\1/p' "$d/MANIFEST.json")
  [ -n "$n" ] || die "$d: MANIFEST.json is damaged (no volume number): copy this volume again"
  [ "$id" = "$EXPORT_ID" ] || die "volume $n ($d) belongs to export $id, not to export $EXPORT_ID: remove it and pass volume $n of this export"
  eval "prev=\${VOL_$n:-}"
  [ -z "$prev" ] || die "volume $n given twice: $prev and $d"
  eval "VOL_$n=\$d"
done
IFS=$OLDIFS

i=1
while [ "$i" -le "$VOLUME_COUNT" ]; do
  eval "d=\${VOL_$i:-}"
  [ -n "$d" ] || die "volume $i of $VOLUME_COUNT is missing: pass the directory of every volume (nothing was loaded)"
  i=$((i + 1))
done

# 2. Checksums of every file on every volume, and every part where this export put it.
i=1
while [ "$i" -le "$VOLUME_COUNT" ]; do
  eval "d=\${VOL_$i}"
  echo "checking volume $i of $VOLUME_COUNT ($d)" >&2
  bad=$(cd "$d" && sha256sum -c SHA256SUMS 2>&1 | grep -v ': OK$' || true)
  [ -z "$bad" ] || die "volume $i ($d) is damaged, nothing was loaded:
$bad"
  echo "$PARTS" | while read -r name vol bytes; do
    [ "$vol" = "$i" ] || continue
    [ -f "$d/$name" ] || die "volume $i ($d): $name is missing"
    size=$(wc -c < "$d/$name" | tr -d ' ')
    [ "$size" = "$bytes" ] || die "volume $i ($d): $name has $size bytes, expected $bytes (truncated?)"
    grep -q "  $name\$" "$d/SHA256SUMS" || die "volume $i ($d): SHA256SUMS does not cover $name"
  done || exit 1
  i=$((i + 1))
done

# 3. Join, decompress, load. Status files stand in for `pipefail`, which POSIX sh lacks.
WORK=$(mktemp -d "$TMP_ROOT/rapidship-install.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM
cat_parts() {
  echo "$PARTS" | while read -r name vol bytes; do
    eval "d=\${VOL_$vol}"
    cat "$d/$name" || { echo fail > "$WORK/cat.failed"; exit 1; }
  done
}
if [ -z "$REGISTRY" ]; then
  echo "loading into docker" >&2
  { cat_parts | zstd -dcq || echo fail > "$WORK/zstd.failed"; } | docker load > "$WORK/load.log" \
    || { cat "$WORK/load.log" >&2; die "docker load failed"; }
  [ ! -f "$WORK/cat.failed" ] && [ ! -f "$WORK/zstd.failed" ] || die "reading or decompressing the parts failed"
else
  echo "decompressing into $WORK/images.tar" >&2
  { cat_parts | zstd -dcq > "$WORK/images.tar"; } || die "reading or decompressing the parts failed"
  [ ! -f "$WORK/cat.failed" ] || die "reading the parts failed"
fi

# 4. Report: every image with the id recorded at export time.
status=0
echo "$IMAGES" | {
  while read -r ref want; do
    if [ -z "$REGISTRY" ]; then
      got=$(docker image inspect --format '{{.Id}}' "$ref" 2>/dev/null || echo none)
      where="$ref"
    else
      path=${ref#*/}
      case "${ref%%/*}" in *.*|*:*|localhost) ;; *) path=$ref ;; esac
      where="$REGISTRY/$path"
      skopeo copy --quiet --dest-tls-verify="$TLS_VERIFY" "docker-archive:$WORK/images.tar:$ref" "docker://$where" >&2 \
        || die "skopeo copy $ref -> $where failed"
      got=sha256:$(skopeo inspect --config --raw --tls-verify="$TLS_VERIFY" "docker://$where" | sha256sum | cut -d' ' -f1)
    fi
    if [ "$got" = "$want" ]; then echo "loaded $where $want"
    else echo "MISMATCH $where: id $got, expected $want" >&2; status=1; fi
  done
  exit $status
} || die "some images did not load with the recorded id"
echo "all images of export $EXPORT_ID are in place" >&2
