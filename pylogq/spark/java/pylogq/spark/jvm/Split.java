package pylogq.spark.jvm;

import java.io.Serializable;

/** One partition's offsets {@code [start, end)} to read from its directory, as the Python planner made them. */
final class Split implements Serializable {
    private static final long serialVersionUID = 1L;

    final String topic;
    final int partition;
    final String directory;
    final long start;
    final long end;

    Split(String topic, int partition, String directory, long start, long end) {
        this.topic = topic;
        this.partition = partition;
        this.directory = directory;
        this.start = start;
        this.end = end;
    }

    String name() {
        return topic + "-" + partition;
    }
}
