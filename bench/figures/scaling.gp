# scaling.gp - bench/figures.sh's scaling figure: aggregate hits/s against
# threads on the 361-site walk, one line per mechanism (bench_scaling's
# curve).  Given with -e: datafile (threads, then one column per series,
# names in the header row), outfile, when (the run's time), ncpu.
set terminal svg size 860,560 fixed font "sans,13" background "white"
set encoding utf8
set termoption noenhanced
set output outfile
set datafile separator "\t"
set datafile missing "NaN"
set key autotitle columnhead inside right center vertical Left reverse opaque box lc rgb "#cccccc"
set title sprintf("Hits/s against threads, one decode step's 361 call sites walked by every thread\nbench_scaling, bench/run %s, %d CPUs", when, ncpu)
set xlabel "threads (pinned round robin to the CPUs)"
set ylabel "aggregate hits/s (median of the repetitions, log scale)"
set logscale x 2
set logscale y 10
set xrange [0.8:10]
set xtics ("1" 1, "2" 2, "4" 4, "8" 8)
set yrange [5e3:3e8]
set ytics ("10 k" 1e4, "100 k" 1e5, "1 M" 1e6, "10 M" 1e7, "100 M" 1e8)
set mytics 10
set grid xtics ytics mytics lc rgb "#dddddd" lw 1
set border 3
set tics nomirror
set arrow 1 from ncpu, graph 0 to ncpu, graph 1 nohead dt 2 lc rgb "#888888"
set label 1 sprintf("%d CPUs: beyond this,\nmore threads share them", ncpu) at ncpu, graph 0.95 offset 0.6, 0 left tc rgb "#555555"
set style line 1 lc rgb "#0b62a4" lw 3 pt 7 ps 1.1
set style line 2 lc rgb "#999999" lw 2 pt 6 ps 1.0 dt 2
set style line 3 lc rgb "#d1495b" lw 2 pt 5 ps 1.0
set style line 4 lc rgb "#2e933c" lw 2 pt 9 ps 1.2
set style line 5 lc rgb "#edae49" lw 2 pt 11 ps 1.2
plot for [i=2:6] datafile using 1:i with linespoints ls (i-1)
