"""The Protobuf schemas of the tests, built as descriptors (no protoc here: the Protobuf Python
package cannot compile .proto text), and their message classes: what a generated ``_pb2``
module would hold, and what confluent-kafka's ProtobufSerializer takes.

    syntax = "proto3"; package shop;
    import "google/protobuf/timestamp.proto"; import "google/protobuf/duration.proto";
    import "google/protobuf/wrappers.proto";
    message Order {
      int64 id = 1; string item = 2; int32 qty = 3; double price = 4; uint32 big = 5;
      repeated string tags = 6; map<string, int64> attrs = 7; State state = 8;
      google.protobuf.Timestamp at = 9; google.protobuf.Duration took = 10;
      google.protobuf.StringValue note = 11; Address ship = 12;
      oneof pay { string card = 13; int64 voucher = 14; }
      [v2 only:] string channel = 15;
      message Address { string city = 1; }
      enum State { NEW = 0; PAID = 1; [refunded=True only:] REFUNDED = 2; }
    }
    message Refund { int64 order_id = 1; }
"""

from __future__ import annotations

from typing import Any


def order_file(version: int = 1, name: str = "shop/order.proto", *, refunded: bool = False) -> Any:
    from google.protobuf import descriptor_pb2 as d

    f = d.FileDescriptorProto(name=name, package="shop", syntax="proto3",
                              dependency=["google/protobuf/timestamp.proto", "google/protobuf/duration.proto",
                                          "google/protobuf/wrappers.proto"])
    F = d.FieldDescriptorProto
    m = f.message_type.add(name="Order")
    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED

    def field(n: str, num: int, t: int, label: int = opt, type_name: str = "", oneof: int | None = None) -> None:
        fd = m.field.add(name=n, number=num, type=t, label=label)
        if type_name:
            fd.type_name = type_name
        if oneof is not None:
            fd.oneof_index = oneof

    field("id", 1, F.TYPE_INT64)
    field("item", 2, F.TYPE_STRING)
    field("qty", 3, F.TYPE_INT32)
    field("price", 4, F.TYPE_DOUBLE)
    field("big", 5, F.TYPE_UINT32)
    field("tags", 6, F.TYPE_STRING, rep)
    entry = m.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=opt)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=opt)
    field("attrs", 7, F.TYPE_MESSAGE, rep, ".shop.Order.AttrsEntry")
    state = m.enum_type.add(name="State")
    state.value.add(name="NEW", number=0)
    state.value.add(name="PAID", number=1)
    if refunded:  # a compatible change that keeps the Spark columns (an enum is a string column)
        state.value.add(name="REFUNDED", number=2)
    field("state", 8, F.TYPE_ENUM, type_name=".shop.Order.State")
    field("at", 9, F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp")
    field("took", 10, F.TYPE_MESSAGE, type_name=".google.protobuf.Duration")
    field("note", 11, F.TYPE_MESSAGE, type_name=".google.protobuf.StringValue")
    addr = m.nested_type.add(name="Address")
    addr.field.add(name="city", number=1, type=F.TYPE_STRING, label=opt)
    field("ship", 12, F.TYPE_MESSAGE, type_name=".shop.Order.Address")
    m.oneof_decl.add(name="pay")
    field("card", 13, F.TYPE_STRING, oneof=0)
    field("voucher", 14, F.TYPE_INT64, oneof=0)
    if version >= 2:
        field("channel", 15, F.TYPE_STRING)
    r = f.message_type.add(name="Refund")
    r.field.add(name="order_id", number=1, type=F.TYPE_INT64, label=opt)
    return f


def order_classes(version: int = 1, *, refunded: bool = False) -> tuple[Any, Any]:
    """(Order, Refund) message classes of ``order_file(version, refunded=...)``, each version in
    a pool of its own (as two builds of a producer would have them)."""
    from google.protobuf import descriptor_pool, duration_pb2, timestamp_pb2, wrappers_pb2
    from google.protobuf.message_factory import GetMessageClass

    pool = descriptor_pool.DescriptorPool()
    for m in (timestamp_pb2, duration_pb2, wrappers_pb2):
        pool.AddSerializedFile(m.DESCRIPTOR.serialized_pb)
    pool.Add(order_file(version, refunded=refunded))
    return (GetMessageClass(pool.FindMessageTypeByName("shop.Order")),
            GetMessageClass(pool.FindMessageTypeByName("shop.Refund")))


def order(cls: Any, i: int, *, state: int | None = None, **extra: Any) -> Any:
    """Order ``i``; ``state`` NEW for even ``i`` and PAID for odd unless given."""
    import datetime as dt

    m = cls(id=i, item=f"item-{i}", qty=i % 7, price=i + 0.25, big=(1 << 32) - 1 - i, tags=["a"] * (i % 3),
            state=i % 2 if state is None else state, **extra)
    m.attrs["n"] = i
    m.at.FromDatetime(dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i))
    m.took.FromTimedelta(dt.timedelta(seconds=i, microseconds=5))
    if i % 2 == 0:
        m.note.value = f"n{i}"
        m.card = f"card-{i}"
    else:
        m.voucher = i * 10
    m.ship.city = f"c{i}"
    return m


# -- three files that import each other (schema references) ---------------------------------
#
#   <prefix>/common.proto:   package shop.common; enum Status { STATUS_UNKNOWN = 0; ACTIVE = 1; CLOSED = 2; }
#                            message Money { string currency = 1; int64 units = 2; }
#   <prefix>/customer.proto: package shop; import "<prefix>/common.proto"; import "google/protobuf/timestamp.proto";
#                            message Customer { string name = 1; shop.common.Status status = 2;
#                                               google.protobuf.Timestamp since = 3; [email=True:] string email = 4; }
#   <prefix>/order.proto:    package shop; import "<prefix>/customer.proto"; import "<prefix>/common.proto";
#                            message Order { int64 id = 1; oneof pay { string card = 6; int64 voucher = 7; }
#                                            Customer buyer = 2; shop.common.Status status = 3;
#                                            repeated Customer others = 4; shop.common.Money total = 5; float ratio = 8; }
#
# Two levels of imports (order -> customer -> common) and an enum both others use. ProtobufSerializer
# registers each imported file under its path as subject (its default reference subject strategy).

def shop_files(prefix: str, *, email: bool = False) -> list[Any]:
    from google.protobuf import descriptor_pb2 as d

    F = d.FieldDescriptorProto
    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    common = d.FileDescriptorProto(name=f"{prefix}/common.proto", package="shop.common", syntax="proto3")
    status = common.enum_type.add(name="Status")
    for n, v in (("STATUS_UNKNOWN", 0), ("ACTIVE", 1), ("CLOSED", 2)):
        status.value.add(name=n, number=v)
    money = common.message_type.add(name="Money")
    money.field.add(name="currency", number=1, type=F.TYPE_STRING, label=opt)
    money.field.add(name="units", number=2, type=F.TYPE_INT64, label=opt)
    customer = d.FileDescriptorProto(name=f"{prefix}/customer.proto", package="shop", syntax="proto3",
                                     dependency=[f"{prefix}/common.proto", "google/protobuf/timestamp.proto"])
    c = customer.message_type.add(name="Customer")
    c.field.add(name="name", number=1, type=F.TYPE_STRING, label=opt)
    c.field.add(name="status", number=2, type=F.TYPE_ENUM, type_name=".shop.common.Status", label=opt)
    c.field.add(name="since", number=3, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp", label=opt)
    if email:
        c.field.add(name="email", number=4, type=F.TYPE_STRING, label=opt)
    order_ = d.FileDescriptorProto(name=f"{prefix}/order.proto", package="shop", syntax="proto3",
                                   dependency=[f"{prefix}/customer.proto", f"{prefix}/common.proto"])
    o = order_.message_type.add(name="Order")
    o.oneof_decl.add(name="pay")
    o.field.add(name="id", number=1, type=F.TYPE_INT64, label=opt)
    o.field.add(name="card", number=6, type=F.TYPE_STRING, label=opt, oneof_index=0)
    o.field.add(name="voucher", number=7, type=F.TYPE_INT64, label=opt, oneof_index=0)
    o.field.add(name="buyer", number=2, type=F.TYPE_MESSAGE, type_name=".shop.Customer", label=opt)
    o.field.add(name="status", number=3, type=F.TYPE_ENUM, type_name=".shop.common.Status", label=opt)
    o.field.add(name="others", number=4, type=F.TYPE_MESSAGE, type_name=".shop.Customer", label=rep)
    o.field.add(name="total", number=5, type=F.TYPE_MESSAGE, type_name=".shop.common.Money", label=opt)
    o.field.add(name="ratio", number=8, type=F.TYPE_FLOAT, label=opt)
    return [common, customer, order_]


def shop_order_class(prefix: str, *, email: bool = False) -> Any:
    """The Order class of :func:`shop_files` (a pool of its own, as one build of a producer)."""
    from google.protobuf import descriptor_pool, timestamp_pb2
    from google.protobuf.message_factory import GetMessageClass

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    for f in shop_files(prefix, email=email):
        pool.Add(f)
    return GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def shop_order(cls: Any, i: int, **extra: Any) -> Any:
    """Order ``i``: every field set on some orders and unset (its default) on others."""
    import datetime as dt

    m = cls(id=i, status=i % 3, ratio=(-0.0 if i % 4 == 1 else i / 8), **extra)
    if i % 2 == 0:
        m.card = f"card-{i}"
    else:
        m.voucher = i * 10
    if i % 3 != 2:
        m.buyer.name = f"buyer-{i}"
        m.buyer.status = (i + 1) % 3
        m.buyer.since.FromDatetime(dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i))
    for k in range(i % 3):
        m.others.add(name=f"o{k}", status=k % 3)
    if i % 2:
        m.total.currency, m.total.units = "EUR", i * 100
    return m
