#!/usr/bin/env escript
%% -*- erlang -*-
%%! +S 2:2
%%
%% bench/emlx_cache.escript - EMLX's own compile-closure cache mechanism,
%% measured for real on the BEAM (issue 12), beside bench_hit's C model of it.
%%
%% A gen_server owns an ETS table (set, protected, read_concurrency) of N
%% rows {Key, Closure, InsertedMs, InsertIndex}, Key a 16-byte binary (a
%% 128-bit fingerprint).  For 1 and for 2 client processes it times the
%% aggregate lookups/s of
%%   call:   gen_server:call(Server, {fetch, Key}), the server does ets:lookup
%%           (every interaction through the server: the review's last ask);
%%   direct: ets:lookup from the client itself (reads as a plain ETS lookup,
%%           the revision before that).
%% Both walk the same key order; every reply is checked (the closure is
%% called and must return its entry's index): a wrong value or a crash exits
%% non-zero.  Each repetition runs call 1 client, call 2 clients, direct 1,
%% direct 2 back to back and keeps that repetition's 2-client / 1-client and
%% call / direct ratios; the table shows median [min, max].
%%
%% usage: bench/emlx_cache.escript [--quick] [--json] [--entries N]...
%%   --quick        short mode (3 repetitions of ~15 ms per client run)
%%   --entries N    table size; repeatable.  Default: 1000 (random keys) and
%%                  361 (one decode step's call sites, walked in one order)
%%   --json         print one JSON object instead of the markdown table
%%   --inject-wrong the server stores one wrong closure (tests the check:
%%                  the run must fail with "wrong value")
%% The VM runs 2 schedulers (+S 2:2), bound to CPUs at start where the VM
%% can (the default bind type; not +sbt, with which a VM that sees no CPU
%% topology refuses to start), else unbound, as the notes say.  Exit status: 0, 1 on a wrong value or a crashed
%% process, 2 on a usage error.
-module(emlx_cache).
-mode(compile).
-behaviour(gen_server).

-export([main/1]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

-define(SEED, {16#ccac, 16#e012, 16#e31f}).
-define(RANDOM_ORDER_LEN, 8192).

%% ------------------------------------------------------------ the server
%% The table lives in the server's state; only the server writes it
%% (protected); reads are either a call or the client's own ets:lookup.

init({Rows, Inject}) ->
    Tab = ets:new(emlx_compile_closures, [set, protected, {read_concurrency, true}]),
    Now = erlang:system_time(millisecond),
    lists:foreach(
      fun({Key, I}) ->
              Fun = case Inject of
                        Key -> closure(I + 1);
                        _ -> closure(I)
                    end,
              true = ets:insert_new(Tab, {Key, Fun, Now, I})
      end, Rows),
    {ok, Tab}.

handle_call({fetch, Key}, _From, Tab) ->
    {reply, fetch(Tab, Key), Tab};
handle_call(table, _From, Tab) ->
    {reply, Tab, Tab}.

handle_cast(_Msg, Tab) -> {noreply, Tab}.
handle_info(_Msg, Tab) -> {noreply, Tab}.

fetch(Tab, Key) ->
    case ets:lookup(Tab, Key) of
        [{_, Fun, _, _}] -> {ok, Fun};
        [] -> {error, cache_miss}
    end.

%% A compiled closure stands in for EMLX's: it captures its entry's index.
closure(I) -> fun(X) -> X + I end.

%% ------------------------------------------------------------ the clients
%% A client walks Order (a list of {Key, Index}) Rounds times.

walk_call(_Srv, [], _All, 1) -> ok;
walk_call(Srv, [], All, R) -> walk_call(Srv, All, All, R - 1);
walk_call(Srv, [{Key, I} | T], All, R) ->
    check(Key, I, gen_server:call(Srv, {fetch, Key}, infinity)),
    walk_call(Srv, T, All, R).

walk_direct(_Tab, [], _All, 1) -> ok;
walk_direct(Tab, [], All, R) -> walk_direct(Tab, All, All, R - 1);
walk_direct(Tab, [{Key, I} | T], All, R) ->
    check(Key, I, fetch(Tab, Key)),
    walk_direct(Tab, T, All, R).

check(Key, I, {ok, Fun}) ->
    case Fun(0) of
        I -> ok;
        V -> exit({wrong_value, Key, {expected, I}, {got, V}})
    end;
check(Key, I, Other) ->
    exit({wrong_value, Key, {expected, I}, {got, Other}}).

%% A client process: waits for {go, Mode, Rounds}, walks, reports done.
client(Coord, Srv, Tab, Order) ->
    receive
        {go, Mode, Rounds} ->
            ok = case Mode of
                     call -> walk_call(Srv, Order, Order, Rounds);
                     direct -> walk_direct(Tab, Order, Order, Rounds)
                 end,
            Coord ! {done, self()},
            client(Coord, Srv, Tab, Order);
        stop ->
            ok
    end.

%% One timed run: the first NClients clients walk Rounds rounds at once.
%% Time: from the first go to the last done, in the coordinator.
timed_run(Clients, NClients, Mode, Rounds) ->
    Use = lists:sublist(Clients, NClients),
    T0 = erlang:monotonic_time(nanosecond),
    [C ! {go, Mode, Rounds} || {C, _} <- Use],
    [wait_done(C, Ref) || {C, Ref} <- Use],
    erlang:monotonic_time(nanosecond) - T0.

wait_done(C, Ref) ->
    receive
        {done, C} -> ok;
        {'DOWN', Ref, process, C, Reason} -> fail(Reason)
    end.

fail({{wrong_value, Key, Exp, Got}, _}) -> fail({wrong_value, Key, Exp, Got});
fail({wrong_value, Key, Exp, Got}) ->
    io:format(standard_error, "emlx_cache: wrong value for key ~ts: ~w, ~w~n",
              [hex(Key), Exp, Got]),
    halt(1);
fail(Reason) ->
    io:format(standard_error, "emlx_cache: a process crashed: ~tp~n", [Reason]),
    halt(1).

hex(Bin) -> [io_lib:format("~2.16.0b", [B]) || <<B>> <= Bin].

%% ------------------------------------------------------------ one table size

%% Keys: N distinct random 128-bit fingerprints.  Order: for 361 (a decode
%% step's call sites) one random permutation, walked again every round; for
%% any other size 8192 keys drawn uniformly at random.
make_keys(N) -> make_keys(N, #{}, []).
make_keys(0, _Seen, Acc) -> lists:reverse(Acc);
make_keys(N, Seen, Acc) ->
    Key = <<(rand:uniform(1 bsl 64) - 1):64, (rand:uniform(1 bsl 64) - 1):64>>,
    case Seen of
        #{Key := _} -> make_keys(N, Seen, Acc);
        _ -> make_keys(N - 1, Seen#{Key => true}, [{Key, N} | Acc])
    end.

make_order(Rows) when length(Rows) =:= 361 ->
    [R || {_, R} <- lists:sort([{rand:uniform(), R} || R <- Rows])];
make_order(Rows) ->
    T = list_to_tuple(Rows),
    [element(rand:uniform(tuple_size(T)), T) || _ <- lists:seq(1, ?RANDOM_ORDER_LEN)].

measure(N, Opt) ->
    rand:seed(exsss, ?SEED),
    Rows = make_keys(N),
    Order = make_order(Rows),
    Inject = case maps:get(inject_wrong, Opt) of
                 true -> element(1, hd(Order));
                 false -> none
             end,
    {ok, Srv} = gen_server:start(?MODULE, {Rows, Inject}, []),
    Tab = gen_server:call(Srv, table),
    %% Both paths answer a miss as a miss.
    Absent = <<0:128>>,
    {error, cache_miss} = gen_server:call(Srv, {fetch, Absent}),
    {error, cache_miss} = fetch(Tab, Absent),
    Self = self(),
    Clients = [spawn_monitor(fun() -> client(Self, Srv, Tab, Order) end) || _ <- [1, 2]],
    SrvRef = monitor(process, Srv),
    Len = length(Order),
    %% Warm-up and sizing: both clients walk once per mode, then one client
    %% three times; each mode gets the rounds that take about TargetMs for
    %% one client at the fastest of the three (a busy machine runs longer).
    TargetNs = maps:get(target_ms, Opt) * 1000000,
    Rounds = maps:from_list(
               [begin
                    _ = timed_run(Clients, 2, M, 1),
                    Ns = lists:min([timed_run(Clients, 1, M, 1) || _ <- [1, 2, 3]]) / Len,
                    {M, max(1, round(TargetNs / (Ns * Len)))}
                end || M <- [call, direct]]),
    Reps = [begin
                [{M, NC, timed_run(Clients, NC, M, maps:get(M, Rounds))}
                 || M <- [call, direct], NC <- [1, 2]]
            end || _ <- lists:seq(1, maps:get(reps, Opt))],
    [C ! stop || {C, _} <- Clients],
    [receive {'DOWN', Ref, process, C, normal} -> ok;
             {'DOWN', Ref, process, C, Why} -> fail(Why)
     end || {C, Ref} <- Clients],
    demonitor(SrvRef, [flush]),
    ok = gen_server:stop(Srv),
    summarise(N, Len, Rounds, Reps).

%% Per mode: aggregate lookups/s for 1 and 2 clients, the 2/1 ratio and the
%% 1-client ns per lookup, each per repetition; call / direct 1-client ratio.
summarise(N, Len, Rounds, Reps) ->
    Modes = [begin
                 Lookups = maps:get(M, Rounds) * Len,
                 T1 = [T || Rep <- Reps, {M2, 1, T} <- Rep, M2 =:= M],
                 T2 = [T || Rep <- Reps, {M2, 2, T} <- Rep, M2 =:= M],
                 {M, #{lookups_per_client => Lookups,
                       agg_1 => stats([Lookups * 1.0e9 / T || T <- T1]),
                       agg_2 => stats([2 * Lookups * 1.0e9 / T || T <- T2]),
                       ratio_2_1 => stats([2 * A / B || {A, B} <- lists:zip(T1, T2)]),
                       ns_1 => stats([T / Lookups || T <- T1]),
                       ns_2 => stats([T / Lookups || T <- T2])}}
             end || M <- [call, direct]],
    NsCall = [T / (maps:get(call, Rounds) * Len) || Rep <- Reps, {call, 1, T} <- Rep],
    NsDirect = [T / (maps:get(direct, Rounds) * Len) || Rep <- Reps, {direct, 1, T} <- Rep],
    #{entries => N, order_len => Len, reps => length(Reps), modes => Modes,
      call_over_direct => stats([C / D || {C, D} <- lists:zip(NsCall, NsDirect)]),
      round_trip_ns => stats([C - D || {C, D} <- lists:zip(NsCall, NsDirect)])}.

stats(L) ->
    S = lists:sort(L),
    N = length(S),
    Med = case N rem 2 of
              1 -> lists:nth(N div 2 + 1, S);
              0 -> (lists:nth(N div 2, S) + lists:nth(N div 2 + 1, S)) / 2
          end,
    #{median => Med, min => hd(S), max => lists:last(S), n => N}.

%% ------------------------------------------------------------ output

num(V) when abs(V) >= 1.0e6 -> io_lib:format("~.3g", [float(V)]);
num(V) when abs(V) >= 100 -> integer_to_list(round(V));
num(V) when abs(V) >= 10 -> io_lib:format("~.1f", [float(V)]);
num(V) -> io_lib:format("~.2f", [float(V)]).

ratio(#{median := M, min := Lo, max := Hi, n := N}, What) ->
    io_lib:format("~ts× [~ts, ~ts] (~b) ~ts", [num(M), num(Lo), num(Hi), N, What]).

mlps(V) -> io_lib:format("~ts M lookups/s", [num(V / 1.0e6)]).

label(call) -> "gen_server:call (server does ets:lookup)";
label(direct) -> "direct ets:lookup from the client".

shape(361) -> "361 entries, one decode step's call sites walked in order";
shape(N) -> io_lib:format("~b entries, random keys", [N]).

rows(#{entries := N, modes := Modes} = R) ->
    [begin
         #{agg_1 := A1, agg_2 := A2, ratio_2_1 := Q, ns_1 := Ns1, ns_2 := Ns2} = S,
         Extra = case M of
                     call ->
                         io_lib:format("; call / direct, 1 client: ~ts (round trip ≈ ~ts ns)",
                                       [ratio(maps:get(call_over_direct, R), "call / direct"),
                                        num(maps:get(median, maps:get(round_trip_ns, R)))]);
                     direct -> ""
                 end,
         io_lib:format("| EMLX real (Erlang gen_server + ETS): ~ts, 2 clients / 1, ~ts | ~ts (2 clients) | "
                       "~ts (1 client) | ~ts | report | report | 1 client ~ts ns/lookup [~ts, ~ts]; "
                       "2 clients ~ts ns/lookup/client~ts |~n",
                       [label(M), shape(N), mlps(maps:get(median, A2)), mlps(maps:get(median, A1)),
                        ratio(Q, "2C / 1C"), num(maps:get(median, Ns1)), num(maps:get(min, Ns1)),
                        num(maps:get(max, Ns1)), num(maps:get(median, Ns2)), Extra])
     end || {M, S} <- Modes].

markdown(Results, Opt) ->
    io:format("### emlx_cache: EMLX's own mechanism for real (Erlang/OTP ~ts gen_server owning an ETS table), "
              "1 and 2 client processes~n~n", [erlang:system_info(otp_release)]),
    io:format("| figure | measured (median) | baseline (median) | ratio: median [min, max] (reps) "
              "| target | status | notes |~n|---|---|---|---|---|---|---|~n"),
    [io:put_chars(rows(R)) || R <- Results],
    io:format("~n- ~ts~n", [vm_note()]),
    io:format("- table: set, protected, read_concurrency; rows {Key, Closure, InsertedMs, InsertIndex}, "
              "Key a 16-byte binary; every reply checked (the closure is called and must return its "
              "entry's index); both clients walk the same key order~n"),
    io:format("- each repetition runs call 1 client, call 2 clients, direct 1, direct 2 "
              "(~~~b ms per 1-client run) and keeps that repetition's ratios; warm-up and sizing first; "
              "time = first go to last done~n", [maps:get(target_ms, Opt)]),
    [io:format("- ~b entries: ~b lookups per client per run with call, ~b with direct "
               "(order of ~b keys)~n",
               [N, maps:get(lookups_per_client, proplists:get_value(call, Ms)),
                maps:get(lookups_per_client, proplists:get_value(direct, Ms)), Len])
     || #{entries := N, modes := Ms, order_len := Len} <- Results],
    io:format("~n").

vm_note() ->
    Bind = case erlang:system_info(scheduler_bindings) of
               B when is_tuple(B) -> tuple_to_list(B);
               _ -> []
           end,
    io_lib:format("VM: erts ~ts, ~b schedulers online, bind type ~p, bindings ~w; "
                  "load average at start ~ts",
                  [erlang:system_info(version), erlang:system_info(schedulers_online),
                   erlang:system_info(scheduler_bind_type), Bind, loadavg()]).

loadavg() ->
    case file:read_file("/proc/loadavg") of
        {ok, B} -> lists:join(" ", lists:sublist(string:lexemes(B, " "), 3));
        _ -> "unknown"
    end.

json(M) when is_map(M) ->
    ["{", lists:join(",", [[json(atom_to_binary(K)), ":", json(V)]
                           || {K, V} <- lists:sort(maps:to_list(M))]), "}"];
json({K, V}) when is_atom(K) -> json(#{K => V});
json(L) when is_list(L) -> ["[", lists:join(",", [json(X) || X <- L]), "]"];
json(B) when is_binary(B) -> [$", B, $"];
json(B) when is_boolean(B) -> atom_to_list(B);
json(A) when is_atom(A) -> json(atom_to_binary(A));
json(I) when is_integer(I) -> integer_to_list(I);
json(F) when is_float(F) -> io_lib:format("~.6g", [F]).

json_out(Results, Opt) ->
    Res = [R#{modes := maps:from_list(Ms)} || #{modes := Ms} = R <- Results],
    Obj = #{name => <<"emlx_cache">>,
            otp_release => list_to_binary(erlang:system_info(otp_release)),
            erts => list_to_binary(erlang:system_info(version)),
            schedulers_online => erlang:system_info(schedulers_online),
            scheduler_bind_type => erlang:system_info(scheduler_bind_type),
            quick => maps:get(quick, Opt),
            loadavg => iolist_to_binary(loadavg()),
            target_ms => maps:get(target_ms, Opt),
            results => Res},
    io:put_chars(unicode:characters_to_binary([json(Obj), "\n"])).

%% ------------------------------------------------------------ main

%% erlang:system_flag(scheduler_bind_type, _) is deprecated in favour of
%% +sbt, but unlike +sbt it fails softly (notsup) where binding is not
%% possible, so the benchmark still runs there, unbound.
%% Its deprecation warning is a logger report: reports below error are
%% dropped, and the rest go to stderr, so stdout stays the table or the JSON.
bind_schedulers() ->
    ok = logger:set_primary_config(level, error),
    ok = logger:remove_handler(default),
    ok = logger:add_handler(default, logger_std_h, #{config => #{type => standard_error}}),
    try erlang:system_flag(scheduler_bind_type, default_bind) of
        _ -> ok
    catch
        error:_ -> ok
    end.

usage(Code) ->
    io:format(case Code of 0 -> standard_io; _ -> standard_error end,
              "usage: emlx_cache.escript [--quick] [--json] [--entries N]... [--inject-wrong]~n", []),
    halt(Code).

args([], O) -> O;
args(["--quick" | T], O) -> args(T, O#{quick := true});
args(["--json" | T], O) -> args(T, O#{json := true});
args(["--inject-wrong" | T], O) -> args(T, O#{inject_wrong := true});
args(["--entries", N | T], O) ->
    case string:to_integer(N) of
        {I, ""} when I > 0 -> args(T, O#{entries := maps:get(entries, O) ++ [I]});
        _ -> usage(2)
    end;
args([H | _], _) when H =:= "-h"; H =:= "--help" -> usage(0);
args([H | _], _) -> io:format(standard_error, "emlx_cache: unknown argument ~ts~n", [H]), usage(2).

main(Argv) ->
    ok = io:setopts(standard_io, [{encoding, unicode}]),
    bind_schedulers(),
    O0 = args(Argv, #{quick => false, json => false, inject_wrong => false, entries => []}),
    Opt = O0#{entries := case maps:get(entries, O0) of [] -> [1000, 361]; E -> E end,
              reps => case maps:get(quick, O0) of true -> 3; false -> 9 end,
              target_ms => case maps:get(quick, O0) of true -> 15; false -> 150 end},
    Results = [measure(N, Opt) || N <- maps:get(entries, Opt)],
    case maps:get(json, Opt) of
        true -> json_out(Results, Opt);
        false -> markdown(Results, Opt)
    end,
    halt(0).
