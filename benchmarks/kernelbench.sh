#!/usr/bin/env bash
# The KernelBench sample on one GPU machine: `bench` over its level folders, one process per
# problem, results (json, md, per-problem logs) under ${OUT:-gpu_out}/kernelbench.
#   KB=path/to/kernelbench  LEVELS="1 2 3"  MODES=default  JOBS=3  BUDGET=540 \
#     bash benchmarks/kernelbench.sh
# JOBS problems share the GPU at once: their host work overlaps, their timing holds it alone.
# The sample must sit inside the working tree that travels to the GPU machine (an ignored
# folder), since nothing outside it goes there.
set -u
kb="${KB:-.kb}"; out="${OUT:-gpu_out}/kernelbench${TAG:+_$TAG}"; mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export STITCH_CACHE_DIR="${STITCH_CACHE_DIR:-/tmp/kb_cache}"
export STITCH_SESSIONS_DIR="${STITCH_SESSIONS_DIR:-/tmp/kb_sessions}"
# Inductor's compiled graphs and autotuning are kept across runs: a rerun times the same
# baselines without compiling them again.
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$STITCH_CACHE_DIR/inductor}"
# A GPU machine that starts bare each time keeps none of that. COMPILE_CACHE_IN (a folder
# holding compile-cache*.txz.* or .tgz.* from earlier runs) restores the judge's compile caches
# (Inductor's graphs and autotuning, Triton's kernels) and this process's, oldest archive
# first; COMPILE_CACHE_OUT (a folder) gets back what this run added to them, as one more
# archive in parts of COMPILE_CACHE_PART (15m) for transfers that limit a file's size and
# their total. Compiled code only, no timing: every number is still measured in this run;
# only the baselines' compile time (three modes: 20-90 s a problem on an H100, mostly
# max-autotune's GEMM autotuning) goes. The kernel cache, whose entries are signed with a
# secret of this machine's, is not among them. xz, where there is one: level 2's caches were
# 47 MB in gzip and 19 MB in xz.
cached="compile inductor"
stamp=$(mktemp)   # what is newer than this, this run wrote
if [ -n "${COMPILE_CACHE_IN:-}" ]; then
  bases=$(ls "$COMPILE_CACHE_IN" 2>/dev/null | sed -n 's/^\(compile-cache[-0-9T]*\.t[gx]z\)\.[a-z]*$/\1/p' | sort -u)
  if [ -n "$bases" ]; then
    mkdir -p "$STITCH_CACHE_DIR" && chmod 700 "$STITCH_CACHE_DIR"
    for base in $bases; do
      case "$base" in *.txz) unzip=-J ;; *) unzip=-z ;; esac
      # those two folders alone (never the kernel cache or its secret), owned by whoever runs
      # this and writable by no one else: the judge loads what Inductor finds there
      cat "$COMPILE_CACHE_IN/$base".* | tar x $unzip -f - --no-same-owner \
        --no-same-permissions -C "$STITCH_CACHE_DIR" $cached 2>/dev/null  # a folder it lacks: fine
    done
    for d in $cached; do [ -d "$STITCH_CACHE_DIR/$d" ] && chmod -R go-w "$STITCH_CACHE_DIR/$d"; done
    touch "$stamp"
    echo "compile caches restored from $COMPILE_CACHE_IN ($(echo $bases | wc -w) archive(s), $(du -sh "$STITCH_CACHE_DIR" | cut -f1))"
  else
    echo "no compile caches in $COMPILE_CACHE_IN: the baselines compile from scratch"
  fi
fi
dirs=(); for l in ${LEVELS:-1 2 3}; do dirs+=("$kb/level$l"); done
python3 -m stitchcuda_lab bench "${dirs[@]}" --device "${DEVICE:-cuda}" --iters "${ITERS:-1}" \
  --modes "${MODES:-default}" --timeout "${TIMEOUT:-240}" --budget "${BUDGET:-540}" \
  --jobs "${JOBS:-3}" \
  --out "$out" ${FILTER:+--filter "$FILTER"} >"$out/bench.log" 2>&1
echo "bench rc=$?"
grep -E "^\[" "$out/bench.log" | tail -50
python3 - "$out/results.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
for name, g in s.get("suites", {}).items():
    print(name, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in g.items()})
PY
tar czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")"   # one file to bring back
if [ -n "${COMPILE_CACHE_OUT:-}" ]; then
  # not where candidates run as this user: they could have written into the folders, and a
  # later run as root would trust what they left
  isolation=$(python3 -c "from stitchcuda_lab.verifier.pool import mode; print(mode())")
  have=(); for d in $cached; do [ -d "$STITCH_CACHE_DIR/$d" ] && have+=("$d"); done
  if [ "$isolation" = same-user ]; then
    echo "compile caches not saved: candidates ran as this user here"
  elif [ ${#have[@]} -gt 0 ]; then
    new=$(mktemp)
    (cd "$STITCH_CACHE_DIR" && find "${have[@]}" -newer "$stamp" \( -type f -o -type l \) -print0) > "$new"
    if [ ! -s "$new" ]; then
      echo "compile caches: nothing new to save"
    else
      if command -v xz >/dev/null; then pack="xz -T0 -6"; ext=txz; else pack="gzip"; ext=tgz; fi
      name="compile-cache-$(date -u +%Y%m%dT%H%M%S).$ext"
      parts=$(mktemp -d)
      if (set -o pipefail; tar cf - -C "$STITCH_CACHE_DIR" --null -T "$new" | $pack \
            | split -b "${COMPILE_CACHE_PART:-15m}" - "$parts/$name."); then
        mkdir -p "$COMPILE_CACHE_OUT" && mv "$parts/$name".* "$COMPILE_CACHE_OUT"/
        echo "compile caches saved: what this run added, $(du -ch "$COMPILE_CACHE_OUT/$name".* | tail -1 | cut -f1) in $name.*"
      else
        echo "compile caches not saved: tar failed"
      fi
      rm -rf "$parts"
    fi
    rm -f "$new"
  fi
fi
rm -f "$stamp"
