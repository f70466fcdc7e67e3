#!/usr/bin/env bash
# README command 1: install dependencies, build, make a small random-weight Gemma 4 model with
# `g4 synth` (nothing is downloaded) and run g4 on it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
G4=build/g4
MODEL=models/tiny-e
echo "== g4 synth: a random-weight Gemma 4 (E2B-like, tiny) with its own tokenizer in $MODEL"
$G4 synth --preset tiny-e --seed 1 --out "$MODEL"
echo "== g4 info"
$G4 info --model "$MODEL"
echo "== g4 generate (random weights: the text is noise by design, and the degeneracy guard says so)"
$G4 generate --model "$MODEL" --chat --prompt "Write a haiku about the sea." -n 48 --temperature 0.8 --seed 7
