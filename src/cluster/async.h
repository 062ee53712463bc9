// Asynchronous steps of the cluster backend, all run by one EventLoop: a step starts some work
// (HTTP requests, processes) and calls its continuation once with the outcome. RunAll starts
// several steps at once and joins them.
#pragma once

#include <functional>
#include <vector>

#include "cluster/event_loop.h"
#include "common/status.h"

namespace libra::cluster {

/// Called once with the outcome of an asynchronous step.
using Done = std::function<void(Status)>;
/// An asynchronous step: starts when called, and calls its Done once.
using AsyncStep = std::function<void(Done)>;

/// Starts every step at once; `then` gets the first error, or OK once every step has answered
/// (at the loop's next turn when there are none, never inside RunAll).
void RunAll(EventLoop& loop, std::vector<AsyncStep> steps, Done then);
/// Like RunAll, but `then` gets the first error as soon as it comes (the other steps run on,
/// their outcomes unheard): for steps that block on each other, such as the members of a
/// rendezvous, where one refusal means the others would wait for nothing.
void RunAllFailFast(EventLoop& loop, std::vector<AsyncStep> steps, Done then);

}  // namespace libra::cluster
