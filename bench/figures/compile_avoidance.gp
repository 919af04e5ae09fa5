# compile_avoidance.gp - bench/figures.sh's compile-avoidance figure: for
# each tier (memory, directory, Redis) and example, the time to obtain one
# program cold (its compile) and warm (the tier's answer), medians, log
# scale, the ratio of the two medians above each pair (k = thousand, M = million).  Given with -e: datafile
# (tier, example, cold us, warm us), outfile, when (the run's time), ncpu.
set terminal svg size 980,600 fixed font "sans,13" background "white"
set encoding utf8
set termoption noenhanced
set output outfile
set datafile separator "\t"
set datafile missing "NaN"
set title sprintf("Compile avoidance: obtaining one program cold (compiled) and warm (from the tier)\nbench_onednn, bench_kernel_jit, bench_halide_jit, bench/run %s", when)
set ylabel "time per program (median, log scale)"
set logscale y 10
set yrange [0.03:3e8]
set ytics ("0.1 µs" 0.1, "1 µs" 1, "10 µs" 10, "100 µs" 100, "1 ms" 1e3, "10 ms" 1e4, "100 ms" 1e5, "1 s" 1e6)
set mytics 10
set grid ytics lc rgb "#dddddd" lw 1
set border 3
set tics nomirror
set xtics scale 0
set xrange [-0.6:*]
set key top left vertical Left reverse noopaque
set bmargin 4.5
ratio(c, w) = c / w >= 1e6 ? sprintf("%.1f M×", c / w / 1e6) : c / w >= 1e4 ? sprintf("%.0f k×", c / w / 1e3) : sprintf("%.0f×", c / w)
set style fill solid 0.9 border -1
w = 0.36
lo = 0.03
plot datafile using ($0 - w/2):3:($0 - w):($0):(lo):3:xtic(sprintf("%s\n%s", strcol(1), strcol(2))) \
       with boxxyerror lc rgb "#d1495b" title "cold: compiled (oneDNN: primitive cache off; Halide memory row: fresh Func + compile_jit)", \
     '' using ($0 + w/2):4:($0):($0 + w):(lo):4 with boxxyerror lc rgb "#0b62a4" title "warm: answered by the tier (memory: ccache hit; directory / Redis: fetch + load)", \
     '' using ($0):($3 * 2.2):(ratio($3, $4)) with labels notitle tc rgb "#333333"
