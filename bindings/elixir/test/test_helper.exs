# `mix test` (bindings/elixir): the suites start ExUnit themselves too, so
# each also runs alone under `elixir` (ctest label `elixir`).
ExUnit.start(seed: 0)
