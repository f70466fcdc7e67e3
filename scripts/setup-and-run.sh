#!/usr/bin/env bash
# README command 1: install dependencies, build, make a small random-weight Gemma 4 model with
# `g4 synth` (nothing is downloaded) and run g4 on it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
G4=build/g4
MODEL=models/tiny-e
$G4 synth --preset tiny-e --seed 1 --out "$MODEL"
$G4 info --model "$MODEL"
$G4 logits --model "$MODEL" --tokens 2,105,1717,107,6,42 --out "$MODEL/logits.f32"
