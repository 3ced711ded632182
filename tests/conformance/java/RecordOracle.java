import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MutableRecordBatch;
import org.apache.kafka.common.record.Record;

/**
 * Kafka's own reading of record batches, as a consumer reads a Fetch response's records: one JVM for many inputs.
 *
 * Reads, on stdin, buffers framed as [int32 length][bytes] until EOF; for each prints, on stdout, one line
 * (starting with "@": the reader skips whatever else the JVM prints): "OK" then per batch " B <crc valid 1/0> <control 1/0> <next offset>" and per record of it
 * " R <offset> <timestamp> <key hex or -> <value hex or -> <header count> (<key utf-8 hex> <value hex or ->)*",
 * or, when MemoryRecords.readableRecords(...).batches() -> batch.iterator() throws, "ERR <exception class>"
 * (the records before it are dropped: a consumer fails the fetch). Hex of an empty byte string is "=".
 */
public final class RecordOracle {
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private static void hex(StringBuilder out, byte[] bytes) {
        if (bytes.length == 0) {
            out.append('=');
            return;
        }
        for (byte b : bytes)
            out.append(HEX[(b >> 4) & 0xf]).append(HEX[b & 0xf]);
    }

    private static void hex(StringBuilder out, ByteBuffer buffer) {
        if (buffer == null) {
            out.append('-');
            return;
        }
        byte[] bytes = new byte[buffer.remaining()];
        buffer.duplicate().get(bytes);
        hex(out, bytes);
    }

    private static String read(byte[] data) {
        StringBuilder out = new StringBuilder("@OK");
        try {
            MemoryRecords records = MemoryRecords.readableRecords(ByteBuffer.wrap(data));
            for (MutableRecordBatch batch : records.batches()) {
                boolean valid = true;
                try {
                    batch.ensureValid();
                } catch (RuntimeException e) {
                    valid = false;
                }
                out.append(" B ").append(valid ? 1 : 0).append(' ').append(batch.isControlBatch() ? 1 : 0)
                   .append(' ').append(batch.nextOffset());
                Iterator<Record> iterator = batch.iterator();
                while (iterator.hasNext()) {
                    Record record = iterator.next();
                    out.append(" R ").append(record.offset()).append(' ').append(record.timestamp()).append(' ');
                    hex(out, record.key());
                    out.append(' ');
                    hex(out, record.value());
                    Header[] headers = record.headers();
                    out.append(' ').append(headers.length);
                    for (Header header : headers) {
                        out.append(' ');
                        hex(out, header.key().getBytes(StandardCharsets.UTF_8));
                        out.append(' ');
                        if (header.value() == null)
                            out.append('-');
                        else
                            hex(out, header.value());
                    }
                }
            }
        } catch (Throwable e) {  // Kafka's exception (or the JVM's: BufferUnderflow, OutOfMemory) is the answer
            return "@ERR " + e.getClass().getName();
        }
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        DataInputStream in = new DataInputStream(new BufferedInputStream(System.in, 1 << 16));
        PrintStream out = new PrintStream(new BufferedOutputStream(System.out, 1 << 16), false, "UTF-8");
        while (true) {
            int length;
            try {
                length = in.readInt();
            } catch (EOFException e) {
                break;
            }
            byte[] data = new byte[length];
            in.readFully(data);
            out.println(read(data));
            if (in.available() == 0)
                out.flush();
        }
        out.flush();
    }
}
