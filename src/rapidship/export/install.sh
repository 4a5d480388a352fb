#!/bin/sh
# Load the images of one rapidship export on a host with no network.
#
#   sh install.sh --key cosign.pub [--registry HOST[:PORT][/PREFIX]] [--insecure] [--tmp DIR] VOLUME_DIR...
#   sh install.sh --no-verify [...] VOLUME_DIR...
#
# VOLUME_DIR: one directory per volume (a mounted disc or a copy of it); default: this script's
# directory. --key: the public key the sender gave you out of band (never a key from a disc).
# BEFORE anything is loaded: every file of every volume is checked against SHA256SUMS and all
# volumes must be present; the disc must name the key given; each image's cosign signature
# (signatures/ on the disc) must verify with that key over the image's manifest digest, and that
# manifest's config must be the image id; one pass over the archive then checks that every image
# it holds is one of those signed ids and that its config hashes to that id. A damaged, missing or
# swapped disc loads nothing; so does an archive spelling a member's name twice or oddly, or tagging
# an image with a name its signature does not list. Then the parts are joined and decompressed into
# `docker load` (which checks every layer against the diff_ids of its signed config), or, with
# --registry, into a temporary docker-archive that skopeo pushes; every image id is compared with
# the one recorded at export time. --no-verify skips the key and signature checks (and says so).
# Needs: sh, sha256sum, zstd, openssl, tar, tee and mkfifo (with --key), and docker (or skopeo with --registry).
set -eu

# @EXPORT_DATA@

REGISTRY=""
TLS_VERIFY=true
TMP_ROOT="${TMPDIR:-/var/tmp}"
DIRS=""
KEY=""
NO_VERIFY=""

die() { echo "install.sh: $*" >&2; exit 1; }
usage() { echo "install.sh: $*" >&2; exit 2; }
need() { command -v "$1" >/dev/null 2>&1 || die "$1 is not installed; $2"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --registry) [ $# -ge 2 ] || usage "--registry needs HOST[:PORT][/PREFIX]"; REGISTRY="$2"; shift 2 ;;
    --registry=*) REGISTRY="${1#--registry=}"; shift ;;
    --insecure) TLS_VERIFY=false; shift ;;
    --tmp) [ $# -ge 2 ] || usage "--tmp needs a directory"; TMP_ROOT="$2"; shift 2 ;;
    --key) [ $# -ge 2 ] || usage "--key needs the public key file (cosign.pub)"; KEY="$2"; shift 2 ;;
    --key=*) KEY="${1#--key=}"; shift ;;
    --no-verify) NO_VERIFY=1; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) usage "unknown option $1 (see: sh install.sh --help)" ;;
    *) DIRS="$DIRS
$1"; shift ;;
  esac
done
[ -n "$DIRS" ] || DIRS=$(cd "$(dirname "$0")" && pwd)
if [ -n "$KEY" ] && [ -n "$NO_VERIFY" ]; then usage "--key and --no-verify: pass one of them"; fi
if [ -z "$KEY" ] && [ -z "$NO_VERIFY" ]; then
  usage "no public key: every image is verified against the key that signed it before anything is loaded.
  Pass --key cosign.pub (the public key given to you out of band, never one from a disc);
  --no-verify loads without checking signatures. Nothing was loaded."
fi
[ -z "$KEY" ] || [ -f "$KEY" ] || usage "--key $KEY: no such file"

need sha256sum "install coreutils"
need zstd "install the zstd package (Debian/Ubuntu: apt-get install zstd; RPM: dnf install zstd)"
if [ -n "$KEY" ]; then
  need openssl "install openssl (Debian/Ubuntu: apt-get install openssl; RPM: dnf install openssl): it checks the signatures"
  need tar "install tar: it reads the archive's manifest and configs before loading"
fi
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

WORK=$(mktemp -d "$TMP_ROOT/rapidship-install.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM
# Status files stand in for `pipefail`, which POSIX sh lacks.
cat_parts() {
  echo "$PARTS" | while read -r name vol bytes; do
    eval "d=\${VOL_$vol}"
    cat "$d/$name" || { echo fail > "$WORK/cat.failed"; exit 1; }
  done
}
is_hex64() { case "$1" in *[!0-9a-f]*) return 1 ;; esac; [ ${#1} -eq 64 ]; }
hash_of() { sha256sum < "$1" | cut -d' ' -f1; }
occurrences() { LC_ALL=C tr -d '@' < "$1" | sed "s/$2/@/g" | LC_ALL=C tr -cd '@' | wc -c | tr -d ' '; }
# docker load and containerd read JSON with Go, which matches keys case-insensitively and decodes
# \u escapes; the seds below read keys as written. So the unsigned JSON of the archive must be
# printable ASCII without backslashes, each KEY only in its exact case (as docker save writes it).
plain_json() {  # FILE KEY...
  f=$1; shift
  [ "$(LC_ALL=C tr -d ' -~\t\r\n' < "$f" | wc -c | tr -d ' ')" = 0 ] || return 1
  ! grep -q '\\' "$f" || return 1
  LC_ALL=C tr 'A-Z' 'a-z' < "$f" > "$f.lower"
  for k in "$@"; do
    lower=$(printf '%s' "$k" | LC_ALL=C tr 'A-Z' 'a-z')
    [ "$(occurrences "$f" "\"$k\"")" = "$(occurrences "$f.lower" "\"$lower\"")" ] || return 1
  done
}

# 3. Signatures: the key, then every image's signature over its manifest, whose config is its id.
if [ -n "$NO_VERIFY" ]; then
  echo "install.sh: WARNING: --no-verify: loading WITHOUT checking signatures. Not checked: the signing key" >&2
  echo "  (the disc names ${KEY_FINGERPRINT:-none: it was exported unsigned}), each image's signature, and that the archive" >&2
  echo "  holds only the signed images. Still checked: checksums, and the loaded ids against the export's record." >&2
  echo "$IMAGES" | while read -r ref want digest; do
    if [ "$digest" = "-" ]; then echo "  $ref $want: exported unsigned" >&2
    else echo "  $ref $want: signed as $digest, signature NOT checked" >&2; fi
  done
else
  openssl pkey -pubin -in "$KEY" -outform DER -out "$WORK/key.der" 2>/dev/null \
    || usage "--key $KEY is not a public key (PEM) openssl can read: pass cosign.pub"
  fp="sha256:$(hash_of "$WORK/key.der")"
  [ -n "$KEY_FINGERPRINT" ] || die "the disc names no signing key: it was exported unsigned (load it only with --no-verify); nothing was loaded"
  [ "$fp" = "$KEY_FINGERPRINT" ] || die "the disc was signed with key $KEY_FINGERPRINT, but --key $KEY is key $fp: pass the public key of whoever signed this disc, or refuse the disc; nothing was loaded"
  : > "$WORK/signed.ids"
  echo "$IMAGES" | while read -r ref want digest; do
    what="image $ref ($want)"
    [ "$digest" != "-" ] || die "$what was exported unsigned: it cannot be verified against $KEY (load it only with --no-verify); nothing was loaded"
    is_hex64 "${digest#sha256:}" || die "$what: no signed digest recorded; nothing was loaded"
    s="$VOL_1/signatures/sha256-${digest#sha256:}"
    for f in manifest.json payload.json payload.sig; do
      [ -f "$s/$f" ] || die "$what: $s/$f is missing: the disc carries no signature for it; nothing was loaded"
    done
    openssl base64 -d -A -in "$s/payload.sig" -out "$WORK/payload.der" 2>/dev/null \
      || die "$what: $s/payload.sig is not base64: swapped or damaged; nothing was loaded"
    openssl dgst -sha256 -verify "$KEY" -signature "$WORK/payload.der" "$s/payload.json" >/dev/null 2>&1 \
      || die "$what: its signature does not verify with $KEY (key $fp): the signature or its payload was changed or swapped; nothing was loaded"
    grep -q '"type":"cosign container image signature"' "$s/payload.json" \
      || die "$what: the signed payload is not a cosign image signature; nothing was loaded"
    signed=$(sed -n 's/.*"docker-manifest-digest":"\(sha256:[0-9a-f]*\)".*/\1/p' "$s/payload.json")
    [ "$signed" = "$digest" ] || die "$what: the signature is over ${signed:-nothing}, not over $digest; nothing was loaded"
    [ "sha256:$(hash_of "$s/manifest.json")" = "$signed" ] \
      || die "$what: $s/manifest.json is not the signed manifest $signed (swapped); nothing was loaded"
    config=$(tr -d ' \t\r\n' < "$s/manifest.json" | sed -n 's/.*"config":{[^}]*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p')
    [ "$config" = "$want" ] || die "$what: its signed manifest is of image ${config:-unknown}, not of $want (swapped); nothing was loaded"
    # the names this image may be created under: those the signed payload lists, no other
    sed -n 's/.*"io.rapidship.names":\[\([^]]*\)\].*/\1/p' "$s/payload.json" | tr ',' '\n' | tr -d '"' \
      > "$WORK/names.${want#sha256:}"
    grep -Fqx "$ref" "$WORK/names.${want#sha256:}" \
      || die "$what: the export names it $ref, a name its signature does not cover (signed names: $(tr '\n' ' ' < "$WORK/names.${want#sha256:}")); nothing was loaded"
    echo "${want#sha256:}" >> "$WORK/signed.ids"
    echo "signature ok: $ref $want (manifest $signed, key $fp)" >&2
  done || exit 1

  # 4. One pass over the archive: only manifest.json, index.json and the signed configs come out.
  echo "checking the archive's images against the signed ids" >&2
  mkdir "$WORK/archive"
  set -- manifest.json index.json
  while read -r h; do set -- "$@" "$h.json" "blobs/sha256/$h"; done < "$WORK/signed.ids"
  extract() {  # extract NAMES... from the archive into $WORK/archive, listing every member into
               # $WORK/members on the same pass; the rest is read and dropped
    rm -f "$WORK/list.fifo" "$WORK/list.failed"
    mkfifo "$WORK/list.fifo"
    { tar -tf - 2>/dev/null || echo fail > "$WORK/list.failed"; cat > /dev/null; } < "$WORK/list.fifo" > "$WORK/members" &
    lister=$!
    { cat_parts | zstd -dcq || echo fail > "$WORK/zstd.failed"; } | tee "$WORK/list.fifo" \
      | { (cd "$WORK/archive" && tar -xf - "$@" 2>/dev/null) || true; cat > /dev/null; }
    wait "$lister" || true
    [ ! -f "$WORK/cat.failed" ] && [ ! -f "$WORK/zstd.failed" ] || die "reading or decompressing the parts failed"
  }
  extract "$@"
  # Names as docker save writes them, each once: another reader could take another copy of a name
  # spelled twice (manifest.json and ./manifest.json), so such an archive is refused whole.
  [ -s "$WORK/members" ] && [ ! -f "$WORK/list.failed" ] || die "the archive cannot be listed: refused, nothing was loaded"
  sed 's:/$::' "$WORK/members" > "$WORK/members.clean"
  odd=$(grep -E '^[.]/|^/|//|(^|/)[.][.]?(/|$)|\\' "$WORK/members.clean" | head -n 1 || true)
  [ -z "$odd" ] || die "archive member $odd is not spelled as docker save writes names: refused, nothing was loaded"
  dup=$(sort "$WORK/members.clean" | uniq -d | head -n 1)
  [ -z "$dup" ] || die "the archive holds $dup more than once (each reader could take another copy): refused, nothing was loaded"
  m="$WORK/archive/manifest.json"
  [ -f "$m" ] && [ ! -h "$m" ] || die "the archive has no manifest.json (docker load would read it another way): refused, nothing was loaded"
  plain_json "$m" Config RepoTags Layers LayerSources \
    || die "the archive's manifest.json is not as docker save writes it (escapes, other bytes, or keys in another case): refused, nothing was loaded"
  # one image entry a line, as the seds read it (and a last newline, or `read` drops the last line)
  { tr -d ' \t\r\n' < "$m" | tr '{' '\n'; echo; } > "$WORK/manifest.lines"
  sed -n 's/.*"Config":"\([^"]*\)".*/\1/p' "$WORK/manifest.lines" > "$WORK/configs"
  [ -s "$WORK/configs" ] || die "the archive's manifest.json names no image: refused, nothing was loaded"
  while read -r c; do
    case "$c" in
      blobs/sha256/*) h=${c#blobs/sha256/} ;;
      *.json) h=${c%.json} ;;
      *) h="" ;;
    esac
    is_hex64 "$h" || die "the archive names a config $c in no known layout: refused, nothing was loaded"
    tags=$(grep -F "\"Config\":\"$c\"" "$WORK/manifest.lines" | sed -n 's/.*"RepoTags":\[\([^]]*\)\].*/\1/p' | tr -d '"')
    what="image ${tags:-(untagged)} (sha256:$h)"
    grep -Fqx "$h" "$WORK/signed.ids" || die "$what in the archive is not a signed image: no signature on this disc covers that id (the archive was swapped, or an image added); nothing was loaded"
    for t in $(printf '%s' "$tags" | tr ',' ' '); do
      grep -Fqx "$t" "$WORK/names.$h" || die "$what: the archive tags it $t, a name its signature does not cover; nothing was loaded"
    done
    f="$WORK/archive/$c"
    [ -f "$f" ] && [ ! -h "$f" ] || die "$what: its config $c is not in the archive; nothing was loaded"
    [ "$(hash_of "$f")" = "$h" ] || die "$what: its config $c does not hash to its name (changed or swapped); nothing was loaded"
  done < "$WORK/configs"
  # A newer engine's OCI layout: what a containerd image store loads is what index.json names.
  if [ -f "$WORK/archive/index.json" ]; then
    plain_json "$WORK/archive/index.json" manifests digest mediaType \
      || die "the archive's index.json is not as docker save writes it (escapes, other bytes, or keys in another case): refused, nothing was loaded"
    { tr -d ' \t\r\n' < "$WORK/archive/index.json" | tr '{' '\n'; echo; } \
      | sed -n 's/.*"digest":"sha256:\([0-9a-f]*\)".*/\1/p' > "$WORK/manifests"
    set --
    while read -r h; do is_hex64 "$h" || die "index.json names $h: refused"; set -- "$@" "blobs/sha256/$h"; done < "$WORK/manifests"
    [ $# -eq 0 ] || extract "$@"
    while read -r h; do
      f="$WORK/archive/blobs/sha256/$h"
      [ -f "$f" ] && [ ! -h "$f" ] && [ "$(hash_of "$f")" = "$h" ] \
        || die "index.json names manifest sha256:$h, which the archive does not hold intact; nothing was loaded"
      plain_json "$f" config digest mediaType manifests layers \
        || die "manifest sha256:$h in index.json is not as docker save writes it: refused, nothing was loaded"
      flat=$(tr -d ' \t\r\n' < "$f")
      case "$flat" in *image.index*|*manifest.list*|*'"manifests":'*)
        die "index.json nests an index (sha256:$h): install.sh cannot check it; use invoke import --key; nothing was loaded" ;; esac
      config=$(printf "%s\n" "$flat" | sed -n 's/.*"config":{[^}]*"digest":"sha256:\([0-9a-f]*\)".*/\1/p')
      grep -Fqx "${config:-none}" "$WORK/signed.ids" || die "image sha256:${config:-unknown} (manifest sha256:$h in index.json) is not a signed image: no signature on this disc covers that id (the archive was swapped, or an image added); nothing was loaded"
    done < "$WORK/manifests"
  fi
  echo "verified $(wc -l < "$WORK/signed.ids" | tr -d ' ') image(s) with key $fp" >&2
fi

# 5. Join, decompress, load.
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

# 6. Report: every image with the id recorded at export time.
status=0
echo "$IMAGES" | {
  while read -r ref want _digest; do
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
