"""The quality benchmark (`cdgt bench quality`): CD-GTMLL, the paper's ablations and peer libraries side by side.

One concept per module:
    datasets     named data sets, built once into a cache with components' build, loaded with TF-IDF for text
    methods      named methods: CDGTConfig variants (presets / overrides) and the peers
    peers        Omikuji (Parabel, Bonsai settings) and LibMultiLabel (one-vs-rest, tree) behind one `fit_predict`
    memory       a run's peak RSS (the kernel's high-water mark, reset at the run's start)
    measures     what one run records beyond cdgt_keras.metrics.report (specialisation, PR and long-tail curves)
    runner       one (dataset, method, seed) run -> one JSON file; resumable
    rows         a run's test outcomes per row (top-k ids, shipped decisions), beside its JSON, not committed
    paired       ours minus a peer with a paired bootstrap interval over test rows
    experiments  the named grids (main, sensitivity_*, rare, overhead, extras) and the profiles (quick, full)
    aggregate    mean ± std over seeds
    verdicts     the paper's claims checked against our numbers
    report       bench/REPORT.md from the JSON; plots the PNGs
Installed as cdgt.bench, beside what it writes (results/, REPORT.md, plots/); only `cdgt bench` (pipeline/cli/bench.py)
imports it.
"""
