//! ann-benchmarks HDF5 files (`train`, `test`, `neighbors`, `distances`, and the `distance`
//! attribute naming the metric), read with the pure-Rust `hdf5-reader` crate: it needs no system
//! libhdf5 and no C build, reads h5py's contiguous and chunked (gzip) layouts, and reports
//! corruption as errors. A truncated file is caught up front from the superblock's end-of-file
//! address; anything the reader still trips over is turned into an error naming the file.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use hdf5_reader::Hdf5File;

use super::{DataError, DataPlan, Metric, Parts};

pub fn load(path: &Path, plan: &DataPlan) -> Result<Parts, DataError> {
    // The reader validates what it parses, but a panic deep inside it must still become a
    // one-line error, not a crash of the whole run.
    match catch_unwind(AssertUnwindSafe(|| load_checked(path, plan))) {
        Ok(result) => result,
        Err(_) => Err(DataError::Invalid {
            path: path.to_owned(),
            message: "the HDF5 reader could not make sense of this file (it is malformed)".into(),
        }),
    }
}

fn load_checked(path: &Path, plan: &DataPlan) -> Result<Parts, DataError> {
    let invalid = |message: String| DataError::Invalid {
        path: path.to_owned(),
        message,
    };
    let length = std::fs::metadata(path)
        .map_err(|source| DataError::Io {
            path: path.to_owned(),
            source,
        })?
        .len();
    let file = Hdf5File::open(path).map_err(|e| {
        invalid(format!(
            "not a readable HDF5 file ({e}); ann-benchmarks files are HDF5 with datasets train, test and neighbors"
        ))
    })?;
    let eof = file.superblock().eof_address;
    if eof > length {
        return Err(DataError::Malformed {
            path: path.to_owned(),
            offset: length,
            message: format!(
                "the file is truncated: its superblock says it is {eof} bytes long, it ends after {length}"
            ),
        });
    }
    let metric = declared_metric(&file).map_err(invalid)?;
    let (train_rows, dims, base) = read_matrix_f32(&file, "train", plan.rows).map_err(invalid)?;
    let (test_rows, test_dims, queries) =
        read_matrix_f32(&file, "test", plan.queries).map_err(invalid)?;
    if test_dims != dims {
        return Err(invalid(format!(
            "`test` has {test_dims} dimensions, `train` has {dims}"
        )));
    }
    // The file's ground truth is for the whole `train` set: usable only when it is all loaded.
    let full_train = file
        .dataset("train")
        .map(|d| d.shape().first().copied() == Some(train_rows as u64))
        .unwrap_or(false);
    let file_truth = if full_train {
        read_neighbors(&file, test_rows).map_err(invalid)?
    } else {
        None
    };
    Ok(Parts {
        description: format!(
            "{} ({} × {dims}, {test_rows} queries)",
            path.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            common::human::format_thousands(train_rows as f64),
        ),
        dims,
        base,
        queries,
        file_truth,
        source_file: Some(path.to_owned()),
        declared_metric: metric,
    })
}

/// The metric of the `distance` attribute (`angular` → cosine, `euclidean` → l2).
fn declared_metric(file: &Hdf5File) -> Result<Option<Metric>, String> {
    let root = file
        .root_group()
        .map_err(|e| format!("no root group: {e}"))?;
    let Ok(attribute) = root.attribute("distance") else {
        return Ok(None);
    };
    let name = attribute
        .read_string()
        .map_err(|e| format!("the `distance` attribute is not a string: {e}"))?;
    match name.trim() {
        "angular" | "cosine" => Ok(Some(Metric::Cosine)),
        "euclidean" | "l2" => Ok(Some(Metric::L2)),
        other => Err(format!(
            "distance `{other}` is not one vector-bench measures (angular or euclidean)"
        )),
    }
}

/// The first `limit` rows of a 2-D dataset as f32.
fn read_matrix_f32(
    file: &Hdf5File,
    name: &str,
    limit: usize,
) -> Result<(usize, usize, Vec<f32>), String> {
    let dataset = file
        .dataset(name)
        .map_err(|e| format!("no `{name}` dataset ({e})"))?;
    let shape = dataset.shape().to_vec();
    let [rows, dims] = shape[..] else {
        return Err(format!(
            "`{name}` has shape {shape:?}; expected rows × dimensions"
        ));
    };
    if rows == 0 || dims == 0 {
        return Err(format!("`{name}` is empty ({rows} × {dims})"));
    }
    let mut values = vec![0f32; (rows * dims) as usize];
    dataset
        .read_into(&mut values)
        .map_err(|e| format!("reading `{name}` failed: {e}"))?;
    let keep = (rows as usize).min(limit);
    values.truncate(keep * dims as usize);
    Ok((keep, dims as usize, values))
}

/// `neighbors`: per query, the ids of its nearest `train` rows, best first.
fn read_neighbors(file: &Hdf5File, queries: usize) -> Result<Option<Vec<Vec<u32>>>, String> {
    let Ok(dataset) = file.dataset("neighbors") else {
        return Ok(None);
    };
    let shape = dataset.shape().to_vec();
    let [rows, width] = shape[..] else {
        return Err(format!(
            "`neighbors` has shape {shape:?}; expected queries × k"
        ));
    };
    let mut ids = vec![0i32; (rows * width) as usize];
    dataset
        .read_into(&mut ids)
        .map_err(|e| format!("reading `neighbors` failed: {e}"))?;
    if ids.iter().any(|id| *id < 0) {
        return Err("`neighbors` holds a negative id".into());
    }
    Ok(Some(
        ids.chunks_exact(width as usize)
            .take(queries)
            .map(|row| row.iter().map(|id| *id as u32).collect())
            .collect(),
    ))
}
