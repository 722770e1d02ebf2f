// kafkajs against a Depot node's Kafka listener, as node/kafka_kafkajs_test.go
// runs it: DEPOT_KAFKA is the listener's address, DEPOT_TOPIC the topic to
// create, produce to and consume, DEPOT_SCRATCH one to create, grow and
// delete, and DEPOT_GROUP the consumer group. Each step prints one JSON line
// on stdout, which the Go test checks; kafkajs's own log goes to stderr.
'use strict';

const { Kafka, CompressionTypes, Partitioners, logLevel } = require('kafkajs');

const broker = process.env.DEPOT_KAFKA;
const topic = process.env.DEPOT_TOPIC;
const scratch = process.env.DEPOT_SCRATCH;
const groupId = process.env.DEPOT_GROUP;
const perBatch = 50;

const kafka = new Kafka({
  clientId: 'depot-kafkajs-test',
  brokers: [broker],
  connectionTimeout: 5000,
  requestTimeout: 20000,
  retry: { retries: 5, initialRetryTime: 100 },
  logLevel: logLevel.WARN,
  logCreator: () => ({ namespace, level, log }) => {
    process.stderr.write(JSON.stringify({ level, namespace, ...log }) + '\n');
  },
});

function print(step, fields) {
  process.stdout.write(JSON.stringify({ step, ...fields }) + '\n');
}

function messages(from) {
  const out = [];
  for (let i = from; i < from + perBatch; i++) {
    out.push({ key: `key-${i}`, value: `value-${i}`, headers: { i: String(i) } });
  }
  return out;
}

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: 3 }, { topic: scratch, numPartitions: 1 }],
    waitForLeaders: true,
  });
  const again = await admin.createTopics({ topics: [{ topic, numPartitions: 3 }] });
  print('createTopics', { created, again });
  print('listTopics', { topics: await admin.listTopics() });
  const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
  print('fetchTopicMetadata', {
    topics: metadata.topics.map((t) => ({
      name: t.name,
      partitions: t.partitions.map((p) => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr })),
    })),
  });

  // Two consumers of one group share the topic before anything is
  // produced: the second one's join rebalances the first.
  const total = 3 * perBatch;
  const consumed = [];
  let done;
  const allConsumed = new Promise((resolve) => { done = resolve; });
  const consumers = [];
  for (const name of ['a', 'b']) {
    const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 200, heartbeatInterval: 500 });
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        consumed.push({
          consumer: name,
          partition,
          offset: message.offset,
          key: message.key.toString(),
          value: message.value.toString(),
          header: message.headers.i.toString(),
        });
        if (consumed.length === total) done();
      },
    });
    consumers.push(consumer);
  }
  const describe = async () => (await admin.describeGroups([groupId])).groups.map((g) => ({
    groupId: g.groupId,
    state: g.state,
    protocolType: g.protocolType,
    protocol: g.protocol,
    members: g.members.map((m) => ({ clientId: m.clientId, assignment: m.memberAssignment.length > 0 })),
  }));
  let groups;
  for (let tries = 0; tries < 300; tries++) {
    groups = await describe();
    if (groups[0].state === 'Stable' && groups[0].members.length === 2 && groups[0].members.every((m) => m.assignment)) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  print('joined', { groups });

  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  const sends = [
    { name: 'acks=-1', acks: -1, from: 0 },
    { name: 'acks=1', acks: 1, from: perBatch },
    { name: 'gzip', acks: -1, from: 2 * perBatch, compression: CompressionTypes.GZIP },
  ];
  for (const s of sends) {
    const results = await producer.send({ topic, acks: s.acks, compression: s.compression, messages: messages(s.from) });
    print('produce', {
      name: s.name,
      results: results.map((r) => ({ partition: r.partition, errorCode: r.errorCode, baseOffset: r.baseOffset })),
    });
  }
  await producer.disconnect();

  await allConsumed;
  print('consume', { messages: consumed });

  // Committed as it goes; the group is described while its member is in it.
  let offsets;
  for (let tries = 0; tries < 100; tries++) {
    offsets = await admin.fetchOffsets({ groupId, topics: [topic] });
    const sum = offsets[0].partitions.reduce((n, p) => n + Number(p.offset), 0);
    if (sum === total) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  print('fetchOffsets', { offsets });
  print('describeGroups', { groups: await describe() });
  for (const consumer of consumers) {
    await consumer.disconnect();
  }

  // Another group rewound to the start: kafkajs commits -2 for each
  // partition, and resolves that to the log start offsets. Each takes
  // kafkajs about 5 s: its paused consumer sleeps its max wait time.
  const rewound = `${groupId}-rewound`;
  await admin.resetOffsets({ groupId: rewound, topic, earliest: true });
  print('resetOffsets', { offsets: await admin.fetchOffsets({ groupId: rewound, topics: [topic] }) });
  print('resolveOffsets', { offsets: await admin.fetchOffsets({ groupId: rewound, topics: [topic], resolveOffsets: true }) });
  print('listGroups', await admin.listGroups());

  const cluster = await admin.describeCluster();
  print('describeCluster', { brokers: cluster.brokers.map((b) => ({ nodeId: b.nodeId, host: b.host, port: b.port })), controller: cluster.controller });
  print('fetchTopicOffsets', { partitions: await admin.fetchTopicOffsets(topic) });
  await admin.createPartitions({ topicPartitions: [{ topic: scratch, count: 4 }] });
  const grown = await admin.fetchTopicMetadata({ topics: [scratch] });
  print('createPartitions', { partitions: grown.topics[0].partitions.length });
  // A group without members: offsets set, read, and the group deleted.
  const scratchGroup = `${groupId}-scratch`;
  await admin.setOffsets({ groupId: scratchGroup, topic, partitions: [{ partition: 1, offset: '3' }] });
  print('setOffsets', { offsets: await admin.fetchOffsets({ groupId: scratchGroup, topics: [topic] }) });
  await admin.deleteGroups([scratchGroup]);
  await admin.deleteTopics({ topics: [scratch] });
  print('deleted', { topics: await admin.listTopics(), groups: (await admin.listGroups()).groups });
  await admin.disconnect();
}

main().then(
  () => print('done', {}),
  (err) => {
    print('failed', { error: String(err && err.stack ? err.stack : err) });
    process.exitCode = 1;
  },
);
