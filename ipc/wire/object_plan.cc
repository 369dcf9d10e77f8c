#include "ipc/wire/object_plan.h"

namespace nanokv::wire {

void ToWirePlan(const nanokv::ObjectPlan& plan, const std::string& device_uuid, ObjectPlan* out) {
  out->set_key_hash(plan.key_hash);
  out->set_device(plan.device);
  out->set_device_uuid(device_uuid);
  out->set_header_offset(plan.header_offset);
  out->set_payload_offset(plan.payload_offset);
  for (const nanokv::ObjectSpan& span : plan.spans) {
    wire::ObjectSpan* s = out->add_spans();
    s->set_page_id(span.page_id);
    s->set_offset(span.offset);
    s->set_length(span.length);
  }
  out->set_page_bytes(plan.page_bytes);
  out->set_n_pages(plan.n_pages);
  out->set_bytes_total(plan.bytes_total);
  out->set_epoch(plan.epoch);
  out->set_state(static_cast<uint32_t>(plan.state));
  out->set_store_bytes(plan.store_bytes);
  out->set_header_page(plan.header_page);
  out->set_write_secret(plan.write_secret);
  out->set_tier(static_cast<uint32_t>(plan.tier));
  out->set_read_entry(plan.read_entry);
}

nanokv::ObjectPlan FromWirePlan(std::string_view key, const ObjectPlan& in) {
  nanokv::ObjectPlan plan;
  plan.key = std::string(key);
  plan.key_hash = in.key_hash();
  plan.device = in.device();
  plan.device_uuid = in.device_uuid();
  plan.header_offset = in.header_offset();
  plan.payload_offset = in.payload_offset();
  for (const auto& s : in.spans()) plan.spans.push_back({s.page_id(), s.offset(), s.length()});
  plan.page_bytes = in.page_bytes();
  plan.n_pages = in.n_pages();
  plan.bytes_total = in.bytes_total();
  plan.epoch = in.epoch();
  plan.state = static_cast<ObjectState>(in.state());
  plan.store_bytes = in.store_bytes();
  plan.header_page = in.header_page();
  plan.write_secret = in.write_secret();
  plan.tier = static_cast<ObjectTier>(in.tier());  // range-checked by Decode (object_codec.cc)
  plan.read_entry = in.read_entry();
  return plan;
}

}  // namespace nanokv::wire
