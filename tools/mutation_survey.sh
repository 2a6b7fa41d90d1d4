#!/usr/bin/env bash
# Mutation testing of the differentiable operations with mutmut (pip install mutmut==3.8.1).
#
# tests/house/test_mutations.py plants the mistakes a person would make in every backward; this asks a tool to
# plant mechanical ones (an operator swapped, a constant changed, an argument dropped) in ops/ and
# functional/, forward and backward alike, and lists the mutants that no test catches ("survivors").
# It runs in a scratch copy, so the repository gets no mutants/ folder or mutmut settings.
#
#   tools/mutation_survey.sh                        # ops/ and functional/: ~1,900 mutants, an hour or more
#   tools/mutation_survey.sh 'minitransformer/ops/arithmetic.py'   # only these files (globs): minutes
#
# Prints the survivors ("survived"); `mutmut show NAME` in the scratch folder shows one. "timeout" means
# a test noticed (it ran far longer than on the clean code); "no tests" means no selected test reaches
# that code (e.g. the GPU-only paths on a machine without one). MUTMUT_CHILDREN sets the workers (2).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
[ -x "$python" ] || python="$(command -v python3)"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("minitransformer/ops/*" "minitransformer/functional/*")
scratch="$(mktemp -d)"
echo "scratch copy: $scratch"
cp -r "$root/minitransformer" "$root/tests" "$scratch/"
{
  echo "[mutmut]"
  echo "source_paths = minitransformer/"
  echo "only_mutate ="
  for target in "${targets[@]}"; do echo "    $target"; done
  echo "pytest_add_cli_args_test_selection ="
  for test in test_mutations test_ops test_functional test_gradcheck test_attention test_tensor \
              test_torch_oracle_ops test_torch_oracle_layers test_torch_oracle_attention; do
    echo "    tests/$test.py"
  done
  # the chapter-listing tests compare the book with the source, which mutmut rewrites: not about gradients
  printf '%s\n' "pytest_add_cli_args =" "    -p" "    no:cacheprovider" "    -p" "    no:xdist" "    -q" \
    "    -k" "    not line_for_line and not listing"
} > "$scratch/setup.cfg"
cd "$scratch"
OPENBLAS_NUM_THREADS=1 "$python" -m mutmut run --max-children "${MUTMUT_CHILDREN:-2}" || true
echo "== survivors (mutants no test caught) =="
"$python" -m mutmut results
