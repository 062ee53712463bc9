// The trainer reply parsers: the first byte picks the reply (train step, save, weight-update
// group, broadcast, membership, health, metrics) and the HTTP status; the rest is the body.
#include "cluster/trainer_client.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace libra;
  using namespace libra::cluster;
  if (size == 0) return 0;
  const uint8_t control = data[0];
  HttpResponse response;
  response.status = (control & 0x80) != 0 ? 500 : 200;
  response.body = std::string(fuzz::AsText(data + 1, size - 1));
  const TrainerClient client("http://127.0.0.1:1");
  switch (control % 7) {
    case 0: {
      TrainStepRequest request;
      request.step = 3;
      TrainSequence sequence;
      sequence.prompt_ids = {1, 2};
      sequence.completion_ids = {3, 4};
      sequence.logprobs = {-0.5, -0.25};
      sequence.loss_mask = {1, 1};
      sequence.advantage = 0.5;
      request.sequences.push_back(sequence);
      static_cast<void>(client.ParseTrainStep(request, response));
      break;
    }
    case 1:
      static_cast<void>(client.ParseSaveWeights("/tmp/w.pt", response));
      break;
    case 2:
      static_cast<void>(client.ParseInitWeightUpdateGroup(response));
      break;
    case 3:
      static_cast<void>(client.ParseBroadcastWeights(response));
      break;
    case 4:
      static_cast<void>(client.ParseMembership(client.Join("r1"), response));
      break;
    case 5:
      static_cast<void>(client.ParseHealth(response));
      break;
    default:
      static_cast<void>(client.ParseMetrics(response));
      break;
  }
  return 0;
}
