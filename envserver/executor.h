/* The executor side of the RPC front (executor.c): the long poll of gpuexec workers,
 * their heartbeats and results, executor connections, the ack rule and the handing of
 * queued jobs to parked polls. Called by server.c (the nng callback, the timer thread,
 * the store threads, the client methods that queue jobs). */
#ifndef KA_ENVSERVER_EXECUTOR_H
#define KA_ENVSERVER_EXECUTOR_H

#include "contexts.h"

/* An ExecResponse with an assignment (job may be NULL: nothing to do). Never NULL. */
nng_msg *srv_assignment(uint64_t request_id, const es_job *job);
/* Hands queued jobs to parked worker polls, oldest poll first (mtx held); the replies
 * go to out. */
void srv_dispatch(es_server *s, srv_outbox *out);
/* An executor request off the wire (nng callback, no lock held): a heartbeat, or a
 * poll with or without a result. Consumes m; c is answered or parked. */
void srv_exec_request(srv_ctx *c, nng_msg *m);
/* Records a job's Result and answers its waiter (a store thread, or the caller once
 * the store threads have stopped); frees w. Call without mtx. */
void srv_complete(es_server *s, srv_work *w);
/* nng pipe event on the executor socket: a closed connection's polls are dropped and
 * its job re-queued or failed (arg: the es_server). */
void srv_exec_pipe_gone(nng_pipe p, nng_pipe_ev ev, void *arg);
/* nng pipe event before an executor connection is admitted: over ipc, a peer of another
 * user is refused (arg: the es_server). */
void srv_exec_pipe_admit(nng_pipe p, nng_pipe_ev ev, void *arg);
/* The ack rule (mtx held, timer thread): unacknowledged jobs go to another idle worker;
 * the replies go to out. */
void srv_unacked(es_server *s, double now, srv_outbox *out);

#endif
