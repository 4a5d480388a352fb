#!/bin/sh
# Load the images of one rapidship export on a host with no network.
#
#   sh install.sh --key cosign.pub [--registry HOST[:PORT][/PREFIX] [--ca-cert FILE | --insecure]] [--tmp DIR]
#                 [--allow-downgrade] [--site DIR] VOLUME_DIR...
#   sh install.sh --no-verify [...] VOLUME_DIR...
#
# VOLUME_DIR: one directory per volume (a mounted disc or a copy of it); default: this script's
# directory. --key: the public key the sender gave you out of band (never a key from a disc).
# BEFORE anything is loaded: every file of every volume is checked against SHA256SUMS and all
# volumes must be present; the disc must name the key given; each image's cosign signature
# (signatures/ on the disc) must verify with that key over the image's manifest digest, whose config
# is the image id, under a name the signature lists. Then the archive is read by content only: every
# regular member is kept under the name of its sha256 (its own name, links, manifest.json and any
# other metadata of the archive are never used). Each image's config (the signed id) and the layers
# it lists must be there; install.sh writes a new archive of exactly those files and a manifest.json
# of its own, and only that archive reaches `docker load` (or, with --registry, skopeo). A name that
# points at a newer release than the image given to it is refused (--allow-downgrade: loudly allowed):
# the order is the build's time, then, for builds of one commit, the serial the signature states,
# compared with the serial the site recorded when it loaded the current image (--site DIR, default
# $RAPIDSHIP_SITE_DIR or ~/.local/state/rapidship, the file `releases`, shared with invoke import).
# Every image id is then compared with the one recorded at export time. --no-verify skips the key and
# signature checks (and says so). Needs: sh, sha256sum, zstd, GNU tar, flock, openssl (with --key), and docker
# (or skopeo with --registry); free space under --tmp (default $TMPDIR or /var/tmp) for the images.
# --registry: --ca-cert (default $RAPIDSHIP_REGISTRY_CA) is the PEM CA that signs its certificate; the
# credential comes from RAPIDSHIP_REGISTRY_USER / _PASSWORD (into a 0600 file of --tmp, never on a
# command line) or else skopeo's own auth file.
set -eu

# @EXPORT_DATA@

REGISTRY=""
TLS_VERIFY=true
CA_CERT="${RAPIDSHIP_REGISTRY_CA:-}"
CA_FLAG=""
TMP_ROOT="${TMPDIR:-/var/tmp}"
DIRS=""
KEY=""
NO_VERIFY=""
ALLOW_DOWNGRADE=""
SITE="${RAPIDSHIP_SITE_DIR:-${HOME:-/root}/.local/state/rapidship}"
LOCK_WAIT="${RAPIDSHIP_SITE_LOCK_WAIT:-600}"  # seconds to wait for another import of the site

die() { echo "install.sh: $*" >&2; exit 1; }
usage() { echo "install.sh: $*" >&2; exit 2; }
need() { command -v "$1" >/dev/null 2>&1 || die "$1 is not installed; $2"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --registry) [ $# -ge 2 ] || usage "--registry needs HOST[:PORT][/PREFIX]"; REGISTRY="$2"; shift 2 ;;
    --registry=*) REGISTRY="${1#--registry=}"; shift ;;
    --insecure) TLS_VERIFY=false; shift ;;
    --ca-cert) [ $# -ge 2 ] || usage "--ca-cert needs the PEM CA file of the --registry"; CA_CERT="$2"; CA_FLAG=1; shift 2 ;;
    --ca-cert=*) CA_CERT="${1#--ca-cert=}"; CA_FLAG=1; shift ;;
    --tmp) [ $# -ge 2 ] || usage "--tmp needs a directory"; TMP_ROOT="$2"; shift 2 ;;
    --key) [ $# -ge 2 ] || usage "--key needs the public key file (cosign.pub)"; KEY="$2"; shift 2 ;;
    --key=*) KEY="${1#--key=}"; shift ;;
    --no-verify) NO_VERIFY=1; shift ;;
    --allow-downgrade) ALLOW_DOWNGRADE=1; shift ;;
    --site) [ $# -ge 2 ] || usage "--site needs the site directory"; SITE="$2"; shift 2 ;;
    --site=*) SITE="${1#--site=}"; shift ;;
    --trust-root|--trust-root=*|--accept-expired)
      die "$1: install.sh checks keys and signatures with sh and openssl alone and cannot run a TUF client: run invoke import --trust-root (rapidship on a host of the site) to decide by the release metadata; nothing was loaded" ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
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
if [ "$TLS_VERIFY" = false ]; then
  [ -z "$CA_FLAG" ] || usage "--ca-cert and --insecure: pass one of them"
  CA_CERT=""   # $RAPIDSHIP_REGISTRY_CA does not apply to a registry reached without TLS checks
fi
if [ -n "$REGISTRY" ] && [ -n "$CA_CERT" ]; then
  [ -f "$CA_CERT" ] || usage "--ca-cert $CA_CERT: no such file (the PEM CA that signs the registry's certificate)"
fi

need sha256sum "install coreutils"
need flock "install util-linux: one import of a site at a time takes its lock"
case "$LOCK_WAIT" in ''|*[!0-9]*) usage "RAPIDSHIP_SITE_LOCK_WAIT=$LOCK_WAIT: pass a whole number of seconds" ;; esac
need zstd "install the zstd package (Debian/Ubuntu: apt-get install zstd; RPM: dnf install zstd)"
need tar "install GNU tar: it reads the archive by content"
tar --version 2>/dev/null | grep -q 'GNU tar' || die "tar is not GNU tar (its --to-command reads the archive by content): install GNU tar"
[ -z "$KEY" ] || need openssl "install openssl (Debian/Ubuntu: apt-get install openssl; RPM: dnf install openssl): it checks the signatures"
if [ -n "$REGISTRY" ]; then need skopeo "install skopeo, or leave out --registry to load into docker"
else need docker "install Docker, or pass --registry to push with skopeo"; fi

# 0. A site that decides by TUF release metadata (invoke import --trust-root kept its root under
# $SITE/tuf) is not one install.sh can serve: sh cannot run a TUF client (docs/supply-chain.md).
[ ! -f "$SITE/tuf/root.json" ] || die "this site decides by TUF release metadata ($SITE/tuf/root.json), which install.sh cannot check: run invoke import --trust-root instead; nothing was loaded"

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

# The work folder: removed on every exit; its .owner stays locked (flock) while this run lives, so a
# folder whose .owner is not locked was left by a run that was killed, and is removed here, named.
for old in "$TMP_ROOT"/rapidship-install.* "$TMP_ROOT"/rapidship-import-* "$TMP_ROOT"/rapidship-trust-* \
           "$TMP_ROOT"/rapidship-tuf-*; do
  [ -d "$old" ] && [ -f "$old/.owner" ] || continue
  flock -n "$old/.owner" true 2>/dev/null || continue  # a run still going
  size=$(du -sk "$old" 2>/dev/null | cut -f1)
  rm -rf "$old" && echo "install.sh: removed $old (${size:-?} KiB): the work folder of an earlier import that did not end (killed)" >&2
done
# Room under --tmp: the archive's members unpacked (TAR_BYTES at most), and with --registry the
# archive written again for skopeo; a little for the small files. Checked before anything is written.
free_kb() { df -Pk "$1" 2>/dev/null | awk 'NR == 2 { print $4 }'; }
copies=1; [ -z "$REGISTRY" ] || copies=2
NEED_KB=$(( TAR_BYTES / 1024 * copies + 256 ))
FULL="free space there, or pass --tmp DIR on a larger file system"
free=$(free_kb "$TMP_ROOT")
[ -z "$free" ] || [ "$free" -ge "$NEED_KB" ] \
  || die "no space left on --tmp $TMP_ROOT: $(( (NEED_KB + 1023) / 1024 )) MiB ($NEED_KB KiB) needed for the images unpacked, $free KiB free; nothing was loaded ($FULL)"
LOADED=""
on_exit() {  # a run that fails on a --tmp that filled up anyway says so (a full disk's own message is terse)
  status=$?
  free=$(free_kb "$TMP_ROOT")
  if [ "$status" -ne 0 ] && [ -n "$free" ] && [ "$free" -lt 256 ]; then
    echo "install.sh: no space left on --tmp $TMP_ROOT: about $NEED_KB KiB needed, $free KiB free; ${LOADED:-nothing was loaded} ($FULL)" >&2
  fi
  rm -rf "$WORK"
}
WORK=$(mktemp -d "$TMP_ROOT/rapidship-install.XXXXXX") || die "cannot make a work folder under --tmp $TMP_ROOT; nothing was loaded"
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
exec 8> "$WORK/.owner"
flock -n 8 || die "$WORK was taken by another run at once; nothing was loaded: run install.sh again"
if [ -n "$REGISTRY" ]; then  # skopeo's view of the site registry: its CA, and a credential file only this user reads
  if [ -n "$CA_CERT" ]; then mkdir "$WORK/certs" && cp "$CA_CERT" "$WORK/certs/ca.crt"; fi
  if [ -n "${RAPIDSHIP_REGISTRY_USER:-}" ] && [ -n "${RAPIDSHIP_REGISTRY_PASSWORD:-}" ]; then
    need base64 "install coreutils"
    auth=$(printf '%s:%s' "$RAPIDSHIP_REGISTRY_USER" "$RAPIDSHIP_REGISTRY_PASSWORD" | base64 | tr -d '\n')
    (umask 077 && printf '{"auths": {"%s": {"auth": "%s"}}}\n' "${REGISTRY%%/*}" "$auth" > "$WORK/auth.json")
  fi
fi
# skopeo with the registry's TLS and auth options: `registry inspect|copy ARGS...`
registry() {
  verb=$1; shift
  side=""; [ "$verb" != copy ] || side=dest-   # copy names the destination's options --dest-*
  [ ! -d "$WORK/certs" ] || set -- "--${side}cert-dir=$WORK/certs" "$@"
  [ ! -f "$WORK/auth.json" ] || set -- "--${side}authfile=$WORK/auth.json" "$@"
  set -- "--${side}tls-verify=$TLS_VERIFY" "$@"
  skopeo "$verb" "$@"
}
# Status files stand in for `pipefail`, which POSIX sh lacks.
cat_parts() {
  echo "$PARTS" | while read -r name vol bytes; do
    eval "d=\${VOL_$vol}"
    cat "$d/$name" || { echo fail > "$WORK/cat.failed"; exit 1; }
  done
}
is_hex64() { case "$1" in *[!0-9a-f]*) return 1 ;; esac; [ ${#1} -eq 64 ]; }
hash_of() { sha256sum < "$1" | cut -d' ' -f1; }
flat() { tr -d ' \t\r\n' < "$1"; echo; }  # one line, newline-terminated (sed and read want it)
# The release order (sign/release.py states the same rule): the 14 digits of a UTC time written as
# invoke build writes it (YYYY-MM-DDTHH:MM:SS+00:00 or ...Z); any other spelling has no key.
release_key() {
  case "$1" in
    [0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]Z|\
[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]+00:00)
      printf '%s' "$1" | cut -c1-19 | tr -cd '0-9' ;;
  esac
}
created_of() { flat "$1" | sed -n 's/.*"org\.opencontainers\.image\.created":"\([^"]*\)".*/\1/p'; }
revision_of() { flat "$1" | sed -n 's/.*"org\.opencontainers\.image\.revision":"\([^"]*\)".*/\1/p'; }

# 3. Signatures: the key, then every image's signature over its manifest, whose config is its id.
: > "$WORK/signed.ids"
if [ -n "$NO_VERIFY" ]; then
  echo "install.sh: WARNING: --no-verify: loading WITHOUT checking signatures. Not checked: the signing key" >&2
  echo "  (the disc names ${KEY_FINGERPRINT:-none: it was exported unsigned}), each image's signature and signed names." >&2
  echo "  Still checked: checksums; only the images the export lists are loaded, each config and layer by its hash." >&2
  echo "$IMAGES" | while read -r ref want digest; do
    if [ "$digest" = "-" ]; then echo "  $ref $want: exported unsigned" >&2
    else echo "  $ref $want: signed as $digest, signature NOT checked" >&2; fi
  done
else
  openssl pkey -pubin -in "$KEY" -outform DER -out "$WORK/key.der" 2>/dev/null \
    || usage "--key $KEY is not a public key (PEM) openssl can read: pass cosign.pub"
  fp="sha256:$(hash_of "$WORK/key.der")"
  [ -n "$KEY_FINGERPRINT" ] || die "the disc names no signing key: it was exported unsigned (load it only with --no-verify); nothing was loaded"
  # a valid key of another signer is the operator's input (exit 2), not a damaged disc
  [ "$fp" = "$KEY_FINGERPRINT" ] || usage "--key: $KEY is key $fp, but this disc was signed with key $KEY_FINGERPRINT; nothing was loaded. Pass --key with the public key of the disc's signer (fingerprint $KEY_FINGERPRINT); if $KEY is the key you were told to expect, this disc is not from your sender: refuse it"
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
    config=$(flat "$s/manifest.json" | sed -n 's/.*"config":{[^}]*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p')
    [ "$config" = "$want" ] || die "$what: its signed manifest is of image ${config:-unknown}, not of $want (swapped); nothing was loaded"
    # the names this image may be created under: those the signed payload lists, no other
    sed -n 's/.*"io.rapidship.names":\[\([^]]*\)\].*/\1/p' "$s/payload.json" | tr ',' '\n' | tr -d '"' \
      > "$WORK/names.${want#sha256:}"
    grep -Fqx "$ref" "$WORK/names.${want#sha256:}" \
      || die "$what: the export names it $ref, a name its signature does not cover (signed names: $(tr '\n' ' ' < "$WORK/names.${want#sha256:}")); nothing was loaded"
    # the release the signed payload states (checked against the image's own labels below)
    sed -n 's/.*"io.rapidship.release":{[^}]*"created":"\([^"]*\)".*/\1/p' "$s/payload.json" > "$WORK/release.${want#sha256:}"
    sed -n 's/.*"io.rapidship.release":{[^}]*"serial":\([1-9][0-9]*\)[,}].*/\1/p' "$s/payload.json" > "$WORK/serial.${want#sha256:}"
    echo "${want#sha256:}" >> "$WORK/signed.ids"
    echo "signature ok: $ref $want (manifest $signed, key $fp)" >&2
  done || exit 1
fi

# 4. The archive, by content: every regular member is kept under the name of its sha256 (tar's
# --to-command is given regular files only; links, directories and devices are never created).
echo "reading the archive by content" >&2
mkdir "$WORK/blobs" "$WORK/empty" "$WORK/image" "$WORK/image/blobs" "$WORK/image/blobs/sha256"
# tar runs take.sh (sourced by its `sh -c`, whose parent is tar) once per regular member: past
# $MEMBERS_MAX members it stops tar, and an empty member (never a config or layer) costs no more
# processes, so a courier's thousands of members cost at most $MEMBERS_MAX shells.
cat > "$WORK/take.sh" <<'EOF'
read -r n < "$RAPIDSHIP_COUNT"; n=$((n + 1)); echo "$n" > "$RAPIDSHIP_COUNT"
if [ "$n" -gt "$RAPIDSHIP_MEMBERS_MAX" ]; then kill "$PPID"; exit 1; fi
[ "${TAR_SIZE:-1}" != 0 ] || exit 0
set -eu
spool=$(mktemp "$RAPIDSHIP_BLOBS/spool.XXXXXX")
cat > "$spool"
h=$(sha256sum < "$spool" | cut -d' ' -f1)
if [ -e "$RAPIDSHIP_BLOBS/$h" ]; then rm -f "$spool"; else mv "$spool" "$RAPIDSHIP_BLOBS/$h"; fi
EOF
RAPIDSHIP_BLOBS="$WORK/blobs" RAPIDSHIP_TAKE="$WORK/take.sh" RAPIDSHIP_COUNT="$WORK/members"
RAPIDSHIP_MEMBERS_MAX=$MEMBERS_MAX
export RAPIDSHIP_BLOBS RAPIDSHIP_TAKE RAPIDSHIP_COUNT RAPIDSHIP_MEMBERS_MAX
# by content, bounded: at most the $TAR_BYTES the export recorded are decompressed (one byte more
# says the parts hold more), and tar runs under a memory cap, so a header declaring gigabytes
# (GNU tar holds a pax or long-name header whole) fails as "memory exhausted", not the host.
read_archive() {  # stdin: a tar stream -> blobs named by hash; a failure leaves $WORK/tar.failed
  echo 0 > "$RAPIDSHIP_COUNT"
  (ulimit -v 524288 2>/dev/null || true; cd "$WORK/empty" \
     && LC_ALL=C tar -xf - --to-command='. "$RAPIDSHIP_TAKE"' 2>"$WORK/tar.log") || echo fail > "$WORK/tar.failed"
  cat > /dev/null
  read -r n < "$RAPIDSHIP_COUNT"
  [ "$n" -le "$RAPIDSHIP_MEMBERS_MAX" ] || echo fail > "$WORK/members.over"
}
{ cat_parts | zstd -dcq || echo fail > "$WORK/zstd.failed"; } \
  | { head -c "$TAR_BYTES" | read_archive; head -c 1 | wc -c | tr -d ' ' > "$WORK/excess"; }
[ "$(cat "$WORK/excess")" = 0 ] || die "the parts decompress to more than the $TAR_BYTES bytes the export recorded: changed after export, refused, nothing was loaded"
[ ! -f "$WORK/cat.failed" ] && [ ! -f "$WORK/zstd.failed" ] || die "reading or decompressing the parts failed; nothing was loaded"
[ ! -f "$WORK/members.over" ] || die "the archive holds more than the $MEMBERS_MAX members $(echo "$IMAGES" | wc -l | tr -d ' ') image(s) can: made or changed by something other than invoke export, refused, nothing was loaded"
[ ! -f "$WORK/tar.failed" ] || die "the archive is not a readable tar ($(tail -n 1 "$WORK/tar.log")): refused, nothing was loaded"

# 4b. A delta disc carries only what the release it extends lacks: the rest is taken, by content as
# above, from `docker save` of this host's images that hold those layers (each still checked below
# against the diff_ids of a signed config; the disc's list only says where to look).
if [ -n "$EXTENDS" ]; then
  missing=""
  for l in $EXTENDS_LAYERS; do [ -f "$WORK/blobs/${l#sha256:}" ] || missing="$missing $l"; done
  base="this disc extends release $EXTENDS ($EXTENDS_NAMES)"
  if [ -n "$missing" ]; then
    [ -z "$REGISTRY" ] || die "$base, whose layers it takes from this host's docker engine: load it without --registry, or use invoke import --registry on a host that holds that release; nothing was loaded"
    holders=""
    for id in $(docker images --quiet --no-trunc --all | sort -u); do
      have=" $(docker image inspect --format '{{range .RootFS.Layers}}{{.}} {{end}}' "$id" 2>/dev/null) "
      for l in $missing; do case "$have" in *" $l "*) holders="$holders $id"; break ;; esac; done
    done
    [ -n "$holders" ] || die "$base, and no image of this engine holds its layers: load that release first, then this disc; nothing was loaded"
    echo "taking $(echo $missing | wc -w | tr -d ' ') layer(s) from this host's images of the release this disc extends" >&2
    # shellcheck disable=SC2086
    RAPIDSHIP_MEMBERS_MAX=1000000000  # this host's own engine, not the courier's archive
    # shellcheck disable=SC2086
    docker save $holders | read_archive
    [ ! -f "$WORK/tar.failed" ] \
      || die "reading this host's images of the release this disc extends failed ($(tail -n 1 "$WORK/tar.log")); nothing was loaded"
    for l in $missing; do
      [ -f "$WORK/blobs/${l#sha256:}" ] || die "$base, and no image of this engine holds its layer $l: load that release first, then this disc; nothing was loaded"
    done
  fi
fi

# 5. What is loaded: per image its config (the id) and the layers the config lists, each a file
# named by its hash; the names the export gives (signed ones, with --key); a manifest.json of our own.
printf '[' > "$WORK/image/manifest.json"
sep=""
echo "$IMAGES" > "$WORK/images"
while read -r ref want digest; do
  h=${want#sha256:}
  what="image $ref ($want)"
  is_hex64 "$h" || die "$what: the export records no image id; nothing was loaded"
  c="$WORK/blobs/$h"
  [ -f "$c" ] || die "$what: the archive holds no config that hashes to $want; nothing was loaded"
  flat "$c" | sed -n 's/.*"diff_ids":\[\([^]]*\)\].*/\1/p' | tr ',' '\n' | tr -d '"' > "$WORK/layers.$h"
  [ -s "$WORK/layers.$h" ] || die "$what: its config lists no layers; nothing was loaded"
  total=$(wc -l < "$WORK/layers.$h" | tr -d ' ')
  created=$(created_of "$c")
  [ -n "$(release_key "$created")" ] || [ -n "$NO_VERIFY" ] || die "$what: the image states no release (org.opencontainers.image.created as a UTC time); nothing was loaded"
  if [ -z "$NO_VERIFY" ] && [ -s "$WORK/release.$h" ]; then
    [ "$(cat "$WORK/release.$h")" = "$created" ] || die "$what: the signed payload states release $(cat "$WORK/release.$h"), the image's labels $created; nothing was loaded"
  fi
  echo "$created" > "$WORK/created.$h"
  cp "$c" "$WORK/image/blobs/sha256/$h"
  layers="" i=0
  while read -r l; do
    i=$((i + 1))
    is_hex64 "${l#sha256:}" || die "$what: its config lists layer $i as $l, not as sha256:<64 hex>; nothing was loaded"
    if [ ! -f "$WORK/image/blobs/sha256/${l#sha256:}" ]; then  # a layer two images share is taken once
      [ -f "$WORK/blobs/${l#sha256:}" ] || die "$what: layer $i of $total ($l) is not in the archive: no member hashes to the diff_id its config lists; nothing was loaded"
      mv "$WORK/blobs/${l#sha256:}" "$WORK/image/blobs/sha256/${l#sha256:}"
    fi
    layers="$layers${layers:+,}\"blobs/sha256/${l#sha256:}\""
  done < "$WORK/layers.$h"
  printf '%s{"Config":"blobs/sha256/%s","RepoTags":["%s"],"Layers":[%s]}' "$sep" "$h" "$ref" "$layers" >> "$WORK/image/manifest.json"
  sep=","
done < "$WORK/images"
printf ']' >> "$WORK/image/manifest.json"
rm -rf "$WORK/blobs"
[ -n "$NO_VERIFY" ] || echo "verified $(wc -l < "$WORK/signed.ids" | tr -d ' ') image(s) with key $fp" >&2

# 6. One import of the site at a time from here to its record (9): the lock invoke import takes too
# (flock on $SITE/import.lock); a killed holder's lock ends with it. Then no name moves to an older
# release than the one it points at now (unless --allow-downgrade).
LOCK="$SITE/import.lock"
{ mkdir -p "$SITE" && : >> "$LOCK"; } 2>/dev/null \
  || die "$LOCK cannot be written (the site's import lock): pass --site DIR, a directory this user can write; nothing was loaded"
exec 9>> "$LOCK"
if ! flock -n 9; then
  echo "install.sh: another import of this site holds $LOCK ($(cat "$LOCK")); waiting up to $LOCK_WAIT s for it" >&2
  flock -w "$LOCK_WAIT" 9 || die "another import of this site ($(cat "$LOCK")) still holds $LOCK after $LOCK_WAIT s; nothing was loaded (let it finish and run install.sh again; RAPIDSHIP_SITE_LOCK_WAIT=SECONDS waits longer)"
fi
printf 'pid %s, install.sh, since %s\n' "$$" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$LOCK"
current_created() {  # REF -> "ID CREATED" of what the name points at now, or nothing
  if [ -z "$REGISTRY" ]; then
    docker image inspect --format '{{.Id}} {{index .Config.Labels "org.opencontainers.image.created"}}' "$1" 2>/dev/null || true
  else
    if registry inspect --config --raw "docker://$(dest_of "$1")" > "$WORK/current.json" 2>"$WORK/current.err"; then
      echo "sha256:$(hash_of "$WORK/current.json") $(created_of "$WORK/current.json")"
    elif grep -Eq 'manifest unknown|name unknown|not found|NOT_FOUND' "$WORK/current.err"; then :
    else die "skopeo cannot read $(dest_of "$1") to compare its release: $(tail -n 1 "$WORK/current.err") (a private CA: --ca-cert; a credential: RAPIDSHIP_REGISTRY_USER / _PASSWORD; nothing was loaded)"; fi
  fi
}
ledger_serial() {  # IMAGE_ID -> the highest serial $SITE/releases records for it, 0 when none
  m=0
  if [ -f "$SITE/releases" ]; then
    while read -r lid _lcreated lserial; do
      case "$lserial" in ''|*[!0-9]*) continue ;; esac
      [ "$lid" != "$1" ] || [ "$lserial" -le "$m" ] || m=$lserial
    done < "$SITE/releases"
  fi
  echo "$m"
}
dest_of() {
  path=${1#*/}
  case "${1%%/*}" in *.*|*:*|localhost) ;; *) path=$1 ;; esac
  echo "$REGISTRY/$path"
}
while read -r ref want _digest; do
  tagged=$ref
  case "${ref##*/}" in *:*) ;; *) tagged="$ref:latest" ;; esac
  now=$(current_created "$tagged")
  [ -n "$now" ] || continue
  now_id=${now%% *} now_created=${now#* }
  [ "$now_id" != "$want" ] || continue
  now_key=$(release_key "$now_created")
  [ -n "$now_key" ] || continue
  new_created=$(cat "$WORK/created.${want#sha256:}")
  new_key=$(release_key "$new_created")
  said=""
  if [ -z "$new_key" ] || [ "$new_key" -lt "$now_key" ]; then
    said="$ref now points at $now_id, release $now_created; the incoming $want is ${new_key:+the older release }${new_created:-of no stated release}"
  elif [ "$new_key" -eq "$now_key" ]; then  # builds of one commit: ordered by their signed serials only
    now_serial=$(ledger_serial "$now_id")
    new_serial=$(cat "$WORK/serial.${want#sha256:}" 2>/dev/null || true)
    if [ "$now_serial" -eq 0 ] || [ "${new_serial:-0}" -le "$now_serial" ]; then
      was="signed serial $now_serial"; [ "$now_serial" -ne 0 ] || was="no signed serial recorded in $SITE"
      said="$ref now points at $now_id, release $now_created ($was); the incoming $want is another build of the same commit (signed serial ${new_serial:-none})"
    fi
  fi
  if [ -n "$said" ]; then
    [ -n "$ALLOW_DOWNGRADE" ] || die "an older release would replace a newer one: $said; nothing was loaded (to go back on purpose: --allow-downgrade)"
    echo "install.sh: WARNING: --allow-downgrade: $said" >&2
    echo "$ref $now_id $now_created" >> "$WORK/downgrades"
  fi
done < "$WORK/images"

# 7. The archive written here (and nothing of the disc's own) goes to docker load or skopeo.
LOADED="the load had begun: check the names it reports, then run install.sh again"
if [ -z "$REGISTRY" ]; then
  echo "loading into docker" >&2
  (cd "$WORK/image" && tar -cf - blobs manifest.json) | docker load > "$WORK/load.log" \
    || { cat "$WORK/load.log" >&2; die "docker load failed"; }
else
  (cd "$WORK/image" && tar -cf "$WORK/images.tar" blobs manifest.json) || die "writing $WORK/images.tar failed"
fi

# 8. Report: every image with the id recorded at export time.
status=0
(  # a subshell: its `exit` ends the report, not the script (step 9 comes after)
  while read -r ref want _digest; do
    if [ -z "$REGISTRY" ]; then
      got=$(docker image inspect --format '{{.Id}}' "$ref" 2>/dev/null || echo none)
      where="$ref"
    else
      where=$(dest_of "$ref")
      registry copy --quiet "docker-archive:$WORK/images.tar:$ref" "docker://$where" >&2 \
        || die "skopeo copy $ref -> $where failed (a private CA: --ca-cert; a credential: RAPIDSHIP_REGISTRY_USER / _PASSWORD)"
      got=sha256:$(registry inspect --config --raw "docker://$where" | sha256sum | cut -d' ' -f1)
    fi
    was=""
    if [ -f "$WORK/downgrades" ]; then
      while read -r n i c; do [ "$n" != "$ref" ] || was="$i $c"; done < "$WORK/downgrades"
    fi
    if [ "$got" = "$want" ]; then echo "loaded $where $want${was:+ (DOWNGRADE from $was)}"
    else echo "MISMATCH $where: id $got, expected $want" >&2; status=1; fi
  done
  exit $status
) < "$WORK/images" || die "some images did not load with the recorded id"
# 9. The site records the signed serial of every image now in place (sign/release.py ledger_line).
if [ -z "$NO_VERIFY" ]; then
  while read -r _ref want _digest; do
    h=${want#sha256:}
    serial=$(cat "$WORK/serial.$h" 2>/dev/null || true)
    [ -n "$serial" ] || continue
    { mkdir -p "$SITE" && printf '%s %s %s\n' "$want" "$(cat "$WORK/created.$h")" "$serial" >> "$SITE/releases"; } \
      || die "the images were loaded, but $SITE/releases cannot be written: pass --site DIR, a directory this user can write, and run again"
  done < "$WORK/images"
fi
echo "all images of export $EXPORT_ID are in place" >&2
