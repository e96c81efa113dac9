/*
 * The anarchon lease protocol, one job, as a Promela model for spin.
 *
 * Store: MemoryStore's rules (packages/anarchon-core/src/anarchon/memory.py):
 *   claim with the mark rule, overlap skip, abandon-older, supersedes and
 *   previous_mark coverage; renew; finish; hand_over; take_over with
 *   attempt/max_attempts and the newest-slot rule; marks.
 * Instances: the scheduler's use of it (scheduler.py): claims when a slot is
 *   due on the instance's clock, the keeper (renewal, local lease deadline
 *   with a safety margin), the stale-grant check of _execute, finish with
 *   retries, the take-over poll, degraded mode and _recover's catch-up.
 * HB=1 adds issue 16's instance heartbeat (anarchon/liveness.py): each
 *   instance upserts alive_until = now + H every tick (a beat after expiry
 *   revives the record); a run whose owner's record expired counts as expired
 *   for take-over, for the abandon-older step of a claim and for the overlap
 *   skip; the owner presumes its runs lost at sent + H - 1 of its last
 *   acknowledged beat (HBSF) and starts no grant whose call was sent before
 *   the last revival (HBREV). OUTAGES: beats that fail for a while, then
 *   succeed. CLUSTER=1: the store judges owners by the caller's dead list
 *   ((instance, alive_until_seen) from its latest beat) and the run's last
 *   grant or renewal. HBHAND=1: finding 3's fix (README).
 *
 * Time is ticks of the store's clock (now). Instance i's wall clock reads
 * now + off[i] - SKEW (off chosen once, 0..2*SKEW); durations (leases) are
 * measured on a monotonic clock that ticks with the store's.
 * Instances are timely: the clock does not tick while one has something due
 * (URGENT). Instance 0 never crashes; the others may crash, or stop with a
 * hand-over. Faults are budgets: CRASHES (crash or
 * stop of instances 1..N-1), LOSSES (a request or its answer lost: the
 * caller sees an exception), DELAYS (a round trip that may lag across ticks).
 *
 * See model/README.md for the properties and how `make model` checks them.
 */

#ifndef N
#define N 2            /* instances */
#endif
#ifndef NS
#define NS 3           /* slots of the job */
#endif
#ifndef P
#define P 2            /* ticks between slots */
#endif
#ifndef L
#define L 5            /* lease_ms in ticks */
#endif
#ifndef H
#define H 3            /* heartbeat expiry in ticks (sent every tick) */
#endif
#ifndef MAXATT
#define MAXATT 2       /* max_attempts */
#endif
#ifndef SKEW
#define SKEW 1         /* |instance clock - store clock| <= SKEW ticks */
#endif
#ifndef CRASHES
#define CRASHES 1
#endif
#ifndef LOSSES
#define LOSSES 1
#endif
#ifndef DELAYS
#define DELAYS 1
#endif
#ifndef JOBT
#define JOBT 1         /* a job returns within JOBT ticks of its start */
#endif
#ifndef JIT
#define JIT 1          /* jitter: a due slot is claimed within JIT ticks */
#endif
#ifndef HB
#define HB 0           /* 1: issue 16's heartbeat protocol */
#endif
#ifndef HBSF
#define HBSF 1         /* HB: an instance stops its runs at its own heartbeat deadline */
#endif
#ifndef HBREV
#define HBREV 1        /* HB: a grant whose call was sent before a lapse ended is not started (`revived`) */
#endif
#ifndef OUTAGES
#define OUTAGES 0      /* HB: beat outages: an instance's beats fail for any number of ticks, then succeed again */
#endif
#ifndef OUTLEN
#define OUTLEN 0       /* an outage lasts at most OUTLEN ticks (0: it may never end) */
#endif
#ifndef CLUSTER
#define CLUSTER 0      /* HB on Redis Cluster: the store judges owners by the caller's dead list, not the records */
#endif
#ifndef HBHAND
#define HBHAND 0       /* HB: a run given up at a heartbeat lapse is handed over: 1 at once, 2 once a beat is acknowledged again (main's code) (README, finding 3) */
#endif
#ifndef HBDEG
#define HBDEG 0        /* HB: a lapsed heartbeat pauses claims and take-overs, recovery after it (README, finding 4) */
#endif
#ifndef FIX_FIRST
#define FIX_FIRST 0    /* 1: catch-up of a job with no mark starts at the first slot tried (README, finding 1) */
#endif
#ifndef MUT
#define MUT 0          /* a deliberate bug, for the negative checks (README) */
#endif

#define NONE 255
#define T(k) (1 + (k) * P)                    /* slot k's time */
#ifndef HZ
#define HORIZON (T(NS - 1) + (MAXATT + 1) * L + 2)   /* every attempt of the last slot can run out */
#else
#define HORIZON HZ                                   /* a shorter horizon (model/README.md says which checks) */
#endif
#define ALL ((1 << NS) - 1)
#define BIT(k) (1 << (k))
#if NS > 1
#define ST1 st[1]
#else
#define ST1 9
#endif
#if NS > 2
#define ST2 st[2]
#else
#define ST2 9
#endif

/* record status */
#define S_NONE 0
#define S_RUN 1
#define S_SKIP 2
#define S_DONE 3
#define S_ABAN 4
/* requests */
#define Q_NONE 0
#define Q_CLAIM 1
#define Q_RENEW 2
#define Q_FINISH 3
#define Q_TAKE 4
#define Q_MARKS 5
#define Q_HAND 6
/* answers */
#define A_UNK 0
#define A_WON 1
#define A_LOST 2
#define A_SKIP 3
#define A_OK 4
#define A_NO 5
/* _recover's steps */
#define R_MARKS 1
#define R_TAKE 2
#define R_CATCH 3      /* the catch-up claim, once the call a take-over grant made (a hand-over) is answered */
#define R_LAPSE 4      /* HBDEG: the heartbeat lapsed: no claims, no take-over polls until a beat is acknowledged */

byte now = 0;

/* ---- the store ---- */
byte st[NS]; byte own[NS]; byte tok[NS]; byte lexp[NS]; byte att[NS]; bool ho[NS];
byte mark = NONE; byte won = NONE; byte fence = 0;
byte hbexp[N];         /* each instance's record: alive_until (store clock) */

/* ---- ghosts: what the properties read; the protocol never does ---- */
byte gcount = 0;      /* grants so far (claims won and take-overs) */
byte gnewest = NONE;  /* newest slot granted by a claim */
byte acct = 0;        /* slots run, skipped, abandoned or covered by a later grant */
byte crashT[N];
bool gone[N];         /* crashed or stopped */
byte gaveup[NS];      /* the tick after its owner gave the run up at a heartbeat lapse, its lease holding; 0 */

byte crashes = 0; byte losses = 0; byte delays = 0; byte outages = 0;

/* ---- instances ---- */
bool alive[N]; byte off[N]; byte nextk[N]; byte caught[N]; byte recov[N]; byte seen[N]; byte first[N];
bool stopping[N];
/* the one backend call in flight: kind, phase (1 sent, 2 answered), argument, token, ghost grant, sent tick */
byte rq[N]; byte rqph[N]; byte rqarg[N]; byte rqtok[N]; byte rqgid[N]; byte rqsent[N]; bool rqdel[N];
byte an[N]; byte anarg[N]; byte antok[N]; byte angid[N];
/* the run this instance holds: slot, token, ghost grant, executing the job, local deadline, next renewal, job end */
byte rslot[N]; byte rtok[N]; byte rgid[N]; bool rbel[N]; byte rdl[N]; byte rnew[N]; byte rjob[N]; bool rret[N];
/* heartbeat (HB): in flight, sent tick, delayed, local deadline, sent this tick */
bool hbph[N]; byte hbsent[N]; bool hbdel[N]; byte hbdl[N]; bool hbdone[N];
/* its beats are failing (an outage: 1 during, 2 over); the call in flight was sent before the last revival */
byte hbout[N]; byte hboutT[N]; bool rqold[N];
byte hgs[N]; byte hgt[N];   /* HBHAND: the run given up at a lapse, to hand over (slot, token), or NONE */
#if CLUSTER
/* the dead list of the instance's latest acknowledged beat: snap[i*N+o] = o's alive_until seen, or NONE;
   a claim or take-over carries the one of its sending (rqsnap) */
byte snap[N * N]; byte rqsnap[N * N];
#endif
bool polled[N];

#define LOCAL(i) (now + off[i] - SKEW)
#if !CLUSTER
/* a run whose owner's record expired counts as expired; i, the caller, does not matter */
#define DEAD(i, k) (HB && hbexp[own[k]] <= now)
#define SNAPDEAD(i, k) DEAD(i, k)
#else
/* Cluster: the owner is on the caller's dead list and the run was last granted or renewed
   (lexp - L) before the alive_until seen: a stale list never condemns a run taken after a revival */
#if MUT != 8
#define SNAPDEAD(i, k) (rqsnap[(i) * N + own[k]] != NONE && lexp[k] - L < rqsnap[(i) * N + own[k]])
#define POLLDEAD(i, k) (snap[(i) * N + own[k]] != NONE && lexp[k] - L < snap[(i) * N + own[k]])
#else
#define SNAPDEAD(i, k) (rqsnap[(i) * N + own[k]] != NONE)    /* MUT 8: no renewed < alive_until_seen */
#define POLLDEAD(i, k) (snap[(i) * N + own[k]] != NONE)
#endif
#define DEAD(i, k) SNAPDEAD(i, k)
#endif
#define GONE(k) (lexp[k] <= now || DEAD(i, k))
/* A poll that would find nothing to take over changes nothing: not made (a reduction) */
#if !CLUSTER
#define TAKEABLE(i) (st[0] == S_RUN && GONE(0) || NS > 1 && st[1] == S_RUN && GONE(1) || NS > 2 && st[2] == S_RUN && GONE(2))
#else
#define PGONE(i, k) (lexp[k] <= now || POLLDEAD(i, k))
#define TAKEABLE(i) (st[0] == S_RUN && PGONE(i, 0) || NS > 1 && st[1] == S_RUN && PGONE(i, 1) || NS > 2 && st[2] == S_RUN && PGONE(i, 2))
#endif
#define OUTGOES(c) (OUTLEN == 0 || now < hboutT[c] + OUTLEN)   /* the outage may go on */
#define DUE(i) (nextk[i] < NS && LOCAL(i) >= T(nextk[i]))
#define CLAIMABLE(i) (recov[i] == 0 && (caught[i] == NONE || nextk[i] > caught[i]))

/* An instance has something to do in this tick: the clock waits for it.
   Every live instance is timely (a slot's claim within JIT ticks, its calls
   answered in the tick) unless a fault delays one of its calls; a call that
   lags is what a stalled or partitioned instance looks like from the store. */
#define LATE(i) (nextk[i] < NS && LOCAL(i) >= T(nextk[i]) + JIT)
#define URGENT(i) (alive[i] && ( \
     (LATE(i) && (rq[i] == Q_NONE || !CLAIMABLE(i))) \
  || (rq[i] == Q_NONE && ((recov[i] != 0 && recov[i] != R_LAPSE) || (rbel[i] && rnew[i] <= now) || rret[i] || (!polled[i] && recov[i] != R_LAPSE && TAKEABLE(i)))) \
  || (rq[i] != Q_NONE && !rqdel[i]) \
  || (HBHAND && rq[i] == Q_NONE && hgs[i] != NONE && (HBHAND == 1 || now < hbdl[i])) \
  || (HB && !hbph[i] && !hbdone[i]) \
  || (HB && hbph[i] && !hbdel[i])))
#if N == 1
#define URGENT_ANY URGENT(0)
#elif N == 2
#define URGENT_ANY (URGENT(0) || URGENT(1))
#else
#define URGENT_ANY (URGENT(0) || URGENT(1) || URGENT(2))
#endif

/* ---- P2 (exclusive execution): nobody else executes the job when a run starts ---- */
inline check_exclusive(i) {
  for (j : 0 .. N - 1) {
    assert(j == i || !rbel[j])
  }
}

/* ---- store operations: each one atomic step, as MemoryStore's under its lock ---- */

inline skip_slot(i, k) {
  st[k] = S_SKIP; acct = acct | BIT(k); an[i] = A_SKIP;
#ifdef CHECK_GAVEUP
  /* P5: never skipped for a run its owner gave up at a heartbeat lapse (in an earlier tick) */
  for (j : 0 .. NS - 1) {
    assert(!(st[j] == S_RUN && !GONE(j) && gaveup[j] != 0 && now >= gaveup[j]))
  }
#endif
#ifdef CHECK_DEADSKIP
  /* P4: never skipped for a run whose owner died more than H ticks ago */
  for (j : 0 .. NS - 1) {
    assert(!(st[j] == S_RUN && !GONE(j) && gone[own[j]] && now >= crashT[own[j]] + H + CLUSTER))
  }
#endif
}

inline s_claim(i, k) {
  anarg[i] = k;
  if
  :: st[k] != S_NONE -> an[i] = A_LOST          /* another instance's record (no retried tokens) */
#if MUT != 2
  :: st[k] == S_NONE && mark != NONE && k <= mark ->   /* the mark rule */
     live = 0;
     for (j : 0 .. NS - 1) {
       if :: st[j] == S_RUN && j < k && !GONE(j) -> live = 1 :: else fi
     }
     if :: live -> skip_slot(i, k) :: else -> an[i] = A_LOST fi
  :: st[k] == S_NONE && (mark == NONE || k > mark) ->
#else
  :: st[k] == S_NONE ->                          /* MUT 2: no mark rule */
#endif
     sup = NONE;
     for (j : 0 .. NS - 1) {                     /* abandon expired older runs */
       if
       :: st[j] == S_RUN && j < k && GONE(j) ->
          st[j] = S_ABAN; acct = acct | BIT(j);
          if :: j == won -> sup = j :: else fi
       :: else
       fi
     }
     prev = mark;
     if :: mark == NONE || k > mark -> mark = k :: else fi;
     live = 0;
#if MUT != 5
     for (j : 0 .. NS - 1) {
       if :: st[j] == S_RUN && !GONE(j) -> live = 1 :: else fi
     }
#endif
     if
     :: live -> skip_slot(i, k)
     :: else ->
        fence++; won = k;
        st[k] = S_RUN; own[k] = i; tok[k] = fence; lexp[k] = now + L; att[k] = 1; ho[k] = 0;
        gcount++;
        assert(gnewest == NONE || k > gnewest);  /* P3: slots are granted in order */
        gnewest = k;
        for (j : 0 .. NS - 1) {                  /* previous_mark, and a catch-up's missed: slots covered */
          if
          :: prev != NONE && j > prev && j < k -> acct = acct | BIT(j)
          :: rqtok[i] != NONE && j >= rqtok[i] && j < k -> acct = acct | BIT(j)
          :: else
          fi
        }
        an[i] = A_WON; antok[i] = fence; angid[i] = gcount
     fi
  fi
}

inline s_take(i) {
  an[i] = A_NO;
  for (j : 0 .. NS - 1) {
    if
    :: st[j] == S_RUN && GONE(j) ->
       if
#if MUT != 7
       :: j != won || (att[j] >= MAXATT && !ho[j]) -> st[j] = S_ABAN; acct = acct | BIT(j)
#else
       :: j != won || (att[j] >= MAXATT && !ho[j]) -> skip   /* MUT 7: used-up runs left running */
#endif
       :: else ->
#if MUT != 3
          fence++;
#endif
          if :: !ho[j] -> att[j]++ :: else fi;
          ho[j] = 0; tok[j] = fence; lexp[j] = now + L; own[j] = i; gcount++; gaveup[j] = 0;
          an[i] = A_WON; anarg[i] = j; antok[i] = fence; angid[i] = gcount
       fi
    :: else
    fi
  }
}

/* P1 (fencing): a write the store accepts comes from the job's newest grant */
inline accepted(i) {
  assert(rqgid[i] == gcount)
}

inline s_renew(i) {
  k = rqarg[i];
  if
#if MUT != 4
  :: st[k] == S_RUN && tok[k] == rqtok[i] && !ho[k] ->
#else
  :: st[k] == S_RUN && !ho[k] ->                 /* MUT 4: renew without the token check */
#endif
     accepted(i); lexp[k] = now + L; an[i] = A_OK
  :: else -> an[i] = A_NO
  fi
}

inline s_finish(i) {
  k = rqarg[i];
  if
#if MUT != 1
  :: st[k] == S_RUN && tok[k] == rqtok[i] ->
#else
  :: st[k] == S_RUN ->                           /* MUT 1: finish without the fencing check */
#endif
     accepted(i); st[k] = S_DONE; lexp[k] = now; acct = acct | BIT(k); an[i] = A_OK
  :: else -> an[i] = A_NO
  fi
}

inline s_hand(i) {
  k = rqarg[i];
  if
  :: st[k] == S_RUN && tok[k] == rqtok[i] -> ho[k] = 1; lexp[k] = now; an[i] = A_OK
  :: else -> an[i] = A_NO
  fi
}

/* ---- the instance side ---- */

/* A backend call: sent now; one atomic round trip unless the fault budget
   delays it (then it reaches the store, and its answer comes back, in later
   steps while the clock may tick). A call made while consuming an answer
   goes out in the next step. */
inline send(i, kind, arg) {
  rq[i] = kind; rqph[i] = 1; rqarg[i] = arg; rqsent[i] = now; rqdel[i] = 0; rqold[i] = 0;
#if CLUSTER
  if
  :: kind == Q_CLAIM || kind == Q_TAKE -> for (j : 0 .. N - 1) { rqsnap[i * N + j] = snap[i * N + j] }; j = 0
  :: else
  fi;
#endif
  if :: delays < DELAYS -> delays++; rqdel[i] = 1 :: true fi
}

inline call(i) {
  if :: !rqdel[i] -> deliver(i); consume(i) :: else fi
}

inline backend_failed(i) {
  if :: recov[i] == 0 || recov[i] == R_CATCH -> recov[i] = R_MARKS :: else fi
}

/* _execute: run a grant, or hand it over when it came too late to be safe */
inline start_run(i) {
  if
  :: now >= sent + L - 1 || (HB && HBSF && (now >= hbdl[i] || HBREV && old)) ->
     send(i, Q_HAND, aarg); rqtok[i] = atok
  :: else ->
     check_exclusive(i);
     printf("MSC: t=%d inst %d runs slot %d (fencing %d)\n", now, i, aarg, atok);
     rslot[i] = aarg; rtok[i] = atok; rgid[i] = agid; rbel[i] = 1;
     rdl[i] = sent + L - 1; rnew[i] = now + 1; rjob[i] = now + JOBT; rret[i] = 0
  fi
}

inline drop_run(i) {
  rslot[i] = NONE; rtok[i] = 0; rgid[i] = 0; rbel[i] = 0; rdl[i] = 0; rnew[i] = 0; rjob[i] = 0; rret[i] = 0
}

/* _claim_missed after _recover's take-over: the newest slot due since the mark */
inline catch_up(i) {
  k = NONE; from = NONE;
  if
  :: seen[i] != NONE -> from = seen[i] + 1;
     for (j : 0 .. NS - 1) {
       if :: j > seen[i] && LOCAL(i) >= T(j) -> k = j :: else fi
     }
#if FIX_FIRST
  :: seen[i] == NONE && first[i] != NONE ->     /* the proposed fix: from the first slot this instance tried */
     from = first[i];
     for (j : 0 .. NS - 1) {
       if :: j >= first[i] && LOCAL(i) >= T(j) -> k = j :: else fi
     }
#endif
  :: else                                        /* a job that never ran is not caught up */
  fi;
  seen[i] = 0;
  if
  :: k != NONE ->
     caught[i] = k;
     if :: nextk[i] <= k -> nextk[i] = k + 1 :: else fi;
     send(i, Q_CLAIM, k); rqtok[i] = from   /* a catch-up claim covers (its missed) from there */
  :: else
  fi;
  k = 0; from = 0
}

inline consume(i) {
  kind = rq[i]; sent = rqsent[i]; qarg = rqarg[i]; qtok = rqtok[i]; old = rqold[i]; rqold[i] = 0;
#if CLUSTER
  for (j : 0 .. N - 1) { rqsnap[i * N + j] = 0 }; j = 0;
#endif
  ans = an[i]; aarg = anarg[i]; atok = antok[i]; agid = angid[i];
  rq[i] = Q_NONE; rqph[i] = 0; rqdel[i] = 0; rqsent[i] = 0; rqarg[i] = 0; rqtok[i] = 0; rqgid[i] = 0;
  an[i] = 0; anarg[i] = 0; antok[i] = 0; angid[i] = 0;
  if
  :: kind == Q_CLAIM ->
     if
     :: ans == A_WON -> start_run(i)
     :: ans == A_UNK -> backend_failed(i)
     :: else
     fi
  :: kind == Q_RENEW ->
     if
     :: ans == A_OK && rbel[i] && rslot[i] == qarg -> rdl[i] = sent + L - 1; rnew[i] = now + 1
     :: ans == A_NO && rslot[i] == qarg -> drop_run(i)
     :: ans == A_UNK -> backend_failed(i); rnew[i] = now
     :: else
     fi
  :: kind == Q_FINISH ->
     if
     :: ans == A_UNK -> backend_failed(i)        /* rret stays: retried while the lease holds */
     :: else -> if :: rslot[i] == qarg -> drop_run(i) :: else fi
     fi
  :: kind == Q_TAKE ->
     if
     :: ans == A_UNK -> backend_failed(i); if :: recov[i] == R_TAKE -> recov[i] = R_MARKS :: else fi
     :: else ->
        if :: ans == A_WON -> start_run(i) :: else fi;
        if
        :: qarg == 1 && recov[i] == R_TAKE ->
           if :: rq[i] == Q_NONE -> recov[i] = 0; catch_up(i) :: else -> recov[i] = R_CATCH fi
        :: else
        fi
     fi
  :: kind == Q_MARKS ->
     if :: ans == A_OK -> recov[i] = R_TAKE; seen[i] = aarg :: else fi
  :: kind == Q_HAND ->
     if :: stopping[i] -> alive[i] = 0 :: else fi
  fi;
  kind = 0; sent = 0; qarg = 0; qtok = 0; ans = 0; aarg = 0; atok = 0; agid = 0; old = 0
}

inline deliver(i) {
  if
  :: losses < LOSSES -> losses++; an[i] = A_UNK            /* the request is lost */
  :: true ->
     if
     :: rq[i] == Q_CLAIM -> s_claim(i, rqarg[i])
     :: rq[i] == Q_RENEW -> s_renew(i)
     :: rq[i] == Q_FINISH -> s_finish(i)
     :: rq[i] == Q_TAKE -> s_take(i)
     :: rq[i] == Q_MARKS -> anarg[i] = mark; an[i] = A_OK
     :: rq[i] == Q_HAND -> s_hand(i)
     fi;
     if :: losses < LOSSES -> losses++; an[i] = A_UNK; anarg[i] = 0; antok[i] = 0; angid[i] = 0 :: true fi
  fi;
  printf("MSC: t=%d inst %d call %d(%d) -> answer %d (slot %d, fencing %d) | mark %d won %d\n", now, i, rq[i], rqarg[i], an[i], anarg[i], antok[i], mark, won);
  rqph[i] = 2; j = 0; k = 0; live = 0; sup = 0; prev = 0
}

/* The beat: an upsert that always writes (a record that expired is revived), and,
   acknowledged, the instance's deadline moves to sent + H - 1; an acknowledgement
   that comes after the deadline passed ends a lapse (`revived`): the call in
   flight then was sent before it (rqold). Cluster: the answer carries the dead list. */
inline heartbeat(i) {
  if
  :: hbout[i] == 1 && OUTGOES(i) -> skip                               /* the outage goes on: it fails */
  :: hbout[i] == 1 -> hbout[i] = 2; hboutT[i] = 0                                    /* the outage ends with this beat */
  :: hbout[i] == 0 && outages < OUTAGES -> outages++; hbout[i] = 1; hboutT[i] = now   /* an outage starts: it fails */
  :: else
  fi;
  if
  :: hbout[i] == 1 -> skip
  :: hbout[i] != 1 && losses < LOSSES -> losses++                      /* lost */
  :: hbout[i] != 1 ->
     hbexp[i] = now + H;
     if
     :: losses < LOSSES -> losses++                                    /* its answer lost */
     :: true ->
        if :: now >= hbdl[i] && rq[i] != Q_NONE -> rqold[i] = 1 :: else fi;
        if :: HBDEG && recov[i] == R_LAPSE -> recov[i] = R_MARKS :: else fi;   /* revived: recover */
        if :: hbsent[i] + H - 1 > hbdl[i] -> hbdl[i] = hbsent[i] + H - 1 :: else fi;
#if CLUSTER
        for (j : 0 .. N - 1) {
          if :: j != i && hbexp[j] <= now -> snap[i * N + j] = hbexp[j] :: else -> snap[i * N + j] = NONE fi
        }; j = 0
#endif
     fi
  fi;
  hbph[i] = 0; hbsent[i] = 0; hbdel[i] = 0
}

inline forget(i) {
  rq[i] = 0; rqph[i] = 0; rqarg[i] = 0; rqtok[i] = 0; rqgid[i] = 0; rqsent[i] = 0; rqdel[i] = 0;
  an[i] = 0; anarg[i] = 0; antok[i] = 0; angid[i] = 0;
  drop_run(i); rslot[i] = 0;
  hbph[i] = 0; hbsent[i] = 0; hbdel[i] = 0; hbdl[i] = 0; hbdone[i] = 0; polled[i] = 0; hbout[i] = 0; hboutT[i] = 0; rqold[i] = 0; hgs[i] = 0; hgt[i] = 0;
#if CLUSTER
  for (j : 0 .. N - 1) { snap[i * N + j] = 0; rqsnap[i * N + j] = 0 }; j = 0;
#endif
  nextk[i] = 0; caught[i] = 0; recov[i] = 0; seen[i] = 0; first[i] = 0; off[i] = 0
}

proctype Instance(byte i) {
  byte j, k, from, kind, live, sup, prev, sent, qarg, qtok, ans, aarg, atok, agid; bool old;
  atomic {                                       /* its clock's offset from the store's */
    if :: off[i] = 0 :: SKEW > 0 -> off[i] = SKEW :: SKEW > 0 -> off[i] = 2 * SKEW fi
  }
end:
  do
  :: atomic { alive[i] && !stopping[i] && DUE(i) && !CLAIMABLE(i) ->             /* degraded or caught up */
       if :: HBDEG && recov[i] != 0 && first[i] == NONE -> first[i] = nextk[i] :: else fi;   /* counts as tried */
       nextk[i]++ }
  :: atomic { alive[i] && !stopping[i] && DUE(i) && CLAIMABLE(i) && rq[i] == Q_NONE ->
       if :: first[i] == NONE -> first[i] = nextk[i] :: else fi;
       send(i, Q_CLAIM, nextk[i]); rqtok[i] = NONE; nextk[i]++; call(i) }
  :: atomic { alive[i] && !stopping[i] && rq[i] == Q_NONE && recov[i] == R_MARKS -> send(i, Q_MARKS, 0); call(i) }
  :: atomic { alive[i] && !stopping[i] && rq[i] == Q_NONE && recov[i] == R_TAKE -> send(i, Q_TAKE, 1); call(i) }
  :: atomic { alive[i] && !stopping[i] && rq[i] == Q_NONE && recov[i] == R_CATCH ->
       recov[i] = 0; catch_up(i); if :: rq[i] != Q_NONE -> call(i) :: else fi }
  :: atomic { alive[i] && !stopping[i] && rq[i] == Q_NONE && !polled[i] && recov[i] != R_LAPSE ->   /* the take-over poll */
       polled[i] = 1;
       if :: TAKEABLE(i) -> send(i, Q_TAKE, 0); call(i) :: else fi }
  :: atomic { alive[i] && rq[i] == Q_NONE && rbel[i] && rnew[i] <= now ->
       send(i, Q_RENEW, rslot[i]); rqtok[i] = rtok[i]; rqgid[i] = rgid[i]; call(i) }
  :: atomic { alive[i] && rbel[i] -> rbel[i] = 0; rret[i] = 1; rnew[i] = 0; rjob[i] = 0 }   /* the job returns */
  :: atomic { alive[i] && rq[i] == Q_NONE && rret[i] ->
       send(i, Q_FINISH, rslot[i]); rqtok[i] = rtok[i]; rqgid[i] = rgid[i]; call(i) }
  :: atomic { HBHAND && alive[i] && rq[i] == Q_NONE && hgs[i] != NONE && (HBHAND == 1 || now < hbdl[i]) ->   /* hand over a run given up at a lapse */
       send(i, Q_HAND, hgs[i]); rqtok[i] = hgt[i]; hgs[i] = NONE; hgt[i] = 0; call(i) }
  :: atomic { alive[i] && rq[i] != Q_NONE && rqph[i] == 1 -> deliver(i) }
  :: atomic { alive[i] && rq[i] != Q_NONE && rqph[i] == 2 -> consume(i) }
  :: atomic { HB && alive[i] && !stopping[i] && !hbph[i] && !hbdone[i] ->
       hbdone[i] = 1; hbsent[i] = now;
       if :: delays < DELAYS -> delays++; hbph[i] = 1; hbdel[i] = 1 :: true -> heartbeat(i) fi }
  :: atomic { HB && alive[i] && hbph[i] -> heartbeat(i) }
  :: atomic { i > 0 && alive[i] && !stopping[i] && crashes < CRASHES ->   /* kill -9 */
       crashes++; alive[i] = 0; gone[i] = 1; crashT[i] = now; forget(i);
       printf("MSC: t=%d inst %d crashes\n", now, i) }
  :: atomic { i > 0 && alive[i] && !stopping[i] && crashes < CRASHES && rbel[i] && rq[i] == Q_NONE ->
       /* stop(): the job is cancelled, its run handed over, then the process ends */
       crashes++; stopping[i] = 1; gone[i] = 1; crashT[i] = now; rbel[i] = 0;
       send(i, Q_HAND, rslot[i]); rqtok[i] = rtok[i]; call(i) }
  :: atomic { !alive[i] && stopping[i] -> stopping[i] = 0; forget(i); if :: HB -> hbexp[i] = now :: else fi }   /* leave: the record expired */
  od
}

/* A beat that cannot be observed is made at the tick (a reduction): the record is
   alive and the deadline ahead before and after it, so no guard of the tick reads a
   different value wherever in the tick it falls; the same holds for its faults (lost,
   answer lost, delayed: it then arrives in a step of its own; an outage going on,
   starting or ending). On Cluster its dead list must not depend on where it falls
   either: every other record is alive and none can leave (stop) in the tick. Any
   other beat is a step of its own (the Instance's), at any point of the tick. */
#define FOLDABLE(c) (HB && alive[c] && !stopping[c] && !hbph[c] && hbexp[c] > now && hbdl[c] > now)

inline beat_at_tick(c) {
  if
  :: hbout[c] == 1 && OUTGOES(c) -> hbdone[c] = 1                      /* the outage goes on */
  :: hbout[c] == 1 -> hbout[c] = 2; hboutT[c] = 0                                    /* it ends with this beat */
  :: hbout[c] != 1
  fi;
  if
  :: hbout[c] != 1 ->
     hbdone[c] = 1;
     if
     :: true -> hbexp[c] = now + H; hbdl[c] = now + H - 1                /* acknowledged */
#if CLUSTER
        ; for (d : 0 .. N - 1) { snap[c * N + d] = NONE }
#endif
     :: losses < LOSSES -> losses++                                     /* lost */
     :: losses < LOSSES -> losses++; hbexp[c] = now + H                 /* its answer lost */
     :: delays < DELAYS -> delays++; hbph[c] = 1; hbdel[c] = 1; hbsent[c] = now   /* delayed */
     :: hbout[c] == 0 && outages < OUTAGES -> outages++; hbout[c] = 1; hboutT[c] = now   /* an outage starts */
     fi
  :: else
  fi
}

proctype Clock() {
  byte c, d; bool f;
end:
  do
  :: atomic { now < HORIZON && !URGENT_ANY ->
       now++;
       printf("MSC: tick t=%d  records %d %d %d  accounted %d\n", now, st[0], ST1, ST2, acct);
       for (c : 0 .. N - 1) {
         polled[c] = 0; hbdone[c] = 0;
         if   /* the keeper: a lease not renewed in time is presumed lost, and so is every run when the heartbeat is */
         :: rbel[c] && (now >= rdl[c] || (HB && HBSF && now >= hbdl[c])) ->
            if
            :: now < rdl[c] ->                   /* given up for the heartbeat alone: the lease still holds it */
               gaveup[rslot[c]] = now + 1;
#if HBHAND
               hgs[c] = rslot[c]; hgt[c] = rtok[c];   /* the fix: hand it over */
#endif
               skip
            :: else
            fi;
            rbel[c] = 0; rret[c] = 0; rslot[c] = NONE; rtok[c] = 0; rgid[c] = 0; rdl[c] = 0; rnew[c] = 0; rjob[c] = 0
         :: else
         fi;
         if :: HBDEG && HB && alive[c] && !stopping[c] && now >= hbdl[c] && recov[c] == 0 -> recov[c] = R_LAPSE :: else fi;
         if :: rbel[c] && now >= rjob[c] -> rbel[c] = 0; rret[c] = 1; rnew[c] = 0; rjob[c] = 0 :: else fi;   /* jobs end */
         if :: rret[c] && now >= rdl[c] -> rret[c] = 0; rslot[c] = NONE; rtok[c] = 0; rgid[c] = 0; rdl[c] = 0 :: else fi  /* finish gives up */
       }
       for (c : 0 .. N - 1) {
         f = FOLDABLE(c);
#if CLUSTER
         for (d : 0 .. N - 1) {
           if :: d != c && (hbexp[d] <= now || crashes < CRASHES) -> f = 0 :: else fi
         }
#endif
         if :: f -> beat_at_tick(c) :: else fi
       }
       c = 0; d = 0; f = 0
     }
  od
}

init {
  byte i, j;
  atomic {
    for (i : 0 .. NS - 1) { st[i] = S_NONE }
    for (i : 0 .. N - 1) {
      alive[i] = 1; rslot[i] = NONE; hgs[i] = NONE;
#if CLUSTER
      for (j : 0 .. N - 1) { snap[i * N + j] = NONE }
#endif
 caught[i] = NONE; first[i] = NONE; hbexp[i] = H; hbdl[i] = H - 1;
      run Instance(i)
    }
    run Clock()
  }
}

/* L1: every slot is eventually run, skipped, abandoned or covered (instance 0 lives) */
ltl live { <> (acct == ALL) }
